#!/usr/bin/env python3
"""Accuracy report of the two-element example (examples/sic-tersoff): reference calls and who
drove, then per temperature (1000 K, 1600 K) the learned model against Tersoff on the held-out
configurations: force RMSE per component for Si, for C and for all atoms, the RMS force for
scale, and the energy RMSE per atom. Exits 1 when a target is missed (force RMSE per element below
--force-fraction of that element's RMS force, energy RMSE < --energy-target meV/atom).
Standard library only.

usage: report.py [log.lammps] [--force-fraction 0.20] [--energy-target 5]"""
import argparse
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from accuracy_report import dump_frames, thermo_runs  # noqa: E402  (the examples' own parsers)

ELEMENTS = {1: "Si", 2: "C"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log", nargs="?", default="log.lammps")
    parser.add_argument("--force-fraction", type=float, default=0.20)
    parser.add_argument("--energy-target", type=float, default=5.0, help="meV/atom")
    options = parser.parse_args()
    text = open(options.log).read()
    calls = [row["f_train[9]"] for rows in thermo_runs(options.log) for row in rows
             if "f_train[9]" in row]
    hand_over = re.search(r"^fix otf/train: step (\d+): the model drives", text, re.MULTILINE)
    take_overs = len(re.findall(r"^fix otf/train: step \d+: .* the reference drives until", text,
                                re.MULTILINE))
    calibration = re.findall(r"^fix otf/train: (calibration over .*)$", text, re.MULTILINE)
    print(f"training: {int(calls[-1]) if calls else '?'} Tersoff calls in all, the model drives "
          f"from step {hand_over.group(1) if hand_over else 'never'}, {take_overs} take-overs by "
          f"the reference after")
    if calibration:
        print(f"  {calibration[-1]}")
    failed = 0
    for temperature in ("1000K", "1600K"):
        columns = ("type", "fx", "fy", "fz", "c_peatom")
        reference = dump_frames(f"heldout-{temperature}-reference.dump", columns)
        model = dump_frames(f"heldout-{temperature}-otf.dump", columns)
        if len(reference) != len(model) or not reference:
            sys.exit(f"report: {len(reference)} reference and {len(model)} model snapshots")
        sq = {name: [0.0, 0.0, 0] for name in ELEMENTS.values()}   # error^2, force^2, components
        energy_sq = 0.0
        for ref, mod in zip(reference, model):
            for atom, r in ref.items():
                name = ELEMENTS[int(r[0])]
                sq[name][0] += sum((mod[atom][k] - r[k]) ** 2 for k in (1, 2, 3))
                sq[name][1] += sum(r[k] ** 2 for k in (1, 2, 3))
                sq[name][2] += 3
            e = (sum(m[4] for m in mod.values()) - sum(r[4] for r in ref.values())) / len(ref)
            energy_sq += e * e
        energy = 1000 * math.sqrt(energy_sq / len(reference))
        total = [sum(v[i] for v in sq.values()) for i in range(3)]
        print(f"{temperature} ({len(reference)} held-out configurations):")
        for name, (err, force, n) in list(sq.items()) + [("all", total)]:
            rmse, rms = math.sqrt(err / n), math.sqrt(force / n)
            ok = rmse <= options.force_fraction * rms
            failed += not ok
            print(f"  {'PASS' if ok else 'FAIL'}  force RMSE {name:3s} {rmse:.4f} eV/A "
                  f"({100 * rmse / rms:.1f}% of its RMS force {rms:.3f} eV/A)  (target <= "
                  f"{100 * options.force_fraction:.0f}%)")
        ok = energy < options.energy_target
        failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'}  energy RMSE {energy:.3f} meV/atom  (target < "
              f"{options.energy_target:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Accuracy report of an on-the-fly example (examples/si-sw, examples/cu-eam): reads the LAMMPS log
and the two held-out dumps (heldout-reference.dump: the reference's forces and per-atom energies;
heldout-otf.dump: the learned model's on the same configurations), prints the numbers the
examples' READMEs report, and exits 1 when a target is missed.

Targets (issue #7, for the Si example): force RMSE < 0.10 eV/A and energy RMSE < 5 meV/atom on the
held-out configurations; at most 10% of the model-driven steps call the reference; the last run
(NVE with the learned model) stays finite with a bounded energy drift.

The Si example states its own, stricter targets (issue #17): force RMSE <= 0.06 eV/A, energy RMSE
< 2 meV/atom, at most 100 reference calls in total (--max-calls).

usage: accuracy_report.py [log.lammps] [--force-target F] [--energy-target E] [--max-calls N]
                          [--label TEXT]"""
import argparse
import math
import re
import sys


def thermo_runs(log_path):
    """Each run's thermo table as a list of {column: value} rows."""
    runs, header = [], None
    with open(log_path) as log:
        for line in log:
            words = line.split()
            if words[:1] == ["Step"]:
                header, rows = words, []
                runs.append(rows)
            elif header and line.startswith("Loop time"):
                header = None
            elif header and len(words) == len(header):
                try:
                    rows.append(dict(zip(header, map(float, words))))
                except ValueError:
                    pass
    return runs


def dump_frames(path, columns=("fx", "fy", "fz", "c_peatom")):
    """Per snapshot: {atom id: (the given columns, as floats)}; by default (fx, fy, fz, pe)."""
    frames = []
    with open(path) as dump:
        lines = dump.read().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("ITEM: NUMBER OF ATOMS"):
            count = int(lines[i + 1])
            while not lines[i].startswith("ITEM: ATOMS"):
                i += 1
            at = {name: k for k, name in enumerate(lines[i].split()[2:])}
            frame = {}
            for row in lines[i + 1:i + 1 + count]:
                v = row.split()
                frame[int(v[at["id"]])] = tuple(float(v[at[c]]) for c in columns)
            frames.append(frame)
            i += count
        i += 1
    return frames


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log", nargs="?", default="log.lammps")
    parser.add_argument("--force-target", type=float, default=0.10, help="eV/A")
    parser.add_argument("--energy-target", type=float, default=5.0, help="meV/atom")
    parser.add_argument("--max-calls", type=int, default=0,
                        help="also check the total number of reference calls (0: no check)")
    parser.add_argument("--label", default="held-out configurations")
    options = parser.parse_args()
    log_path = options.log
    runs = thermo_runs(log_path)
    with open(log_path) as log:
        text = log.read()
    hand_over = re.search(r"^fix otf/train: step (\d+): the model drives", text, re.MULTILINE)
    take_overs = len(re.findall(r"^fix otf/train: step \d+: .* the reference drives until",
                                text, re.MULTILINE))
    training, nve = runs[0], runs[-1]
    reference = dump_frames("heldout-reference.dump")
    model = dump_frames("heldout-otf.dump")
    if len(reference) != len(model) or not reference:
        sys.exit(f"report: {len(reference)} reference and {len(model)} model snapshots")
    force_sq, components, energy_sq = 0.0, 0, 0.0
    for ref, mod in zip(reference, model):
        for atom, r in ref.items():
            m = mod[atom]
            force_sq += sum((m[k] - r[k]) ** 2 for k in range(3))
            components += 3
        energy_error = (sum(m[3] for m in mod.values()) - sum(r[3] for r in ref.values())) / len(ref)
        energy_sq += energy_error ** 2
    force_rmse = math.sqrt(force_sq / components)
    energy_rmse = 1000.0 * math.sqrt(energy_sq / len(reference))

    last = training[-1]
    model_steps, model_calls = last["f_train[13]"], last["f_train[14]"]
    call_fraction = model_calls / model_steps if model_steps else float("nan")

    etotal = [row["TotEng"] for row in nve]
    temps = [row["Temp"] for row in nve]
    atoms = len(reference[0])
    finite = all(math.isfinite(x) for x in etotal + temps)
    # Metal units: the timestep is in ps (the last timestep command, echoed in the log).
    timestep = float(re.findall(r"^\s*timestep\s+([0-9.eE+-]+)", text, re.MULTILINE)[-1])
    picoseconds = (nve[-1]["Step"] - nve[0]["Step"]) * timestep
    drift = (etotal[-1] - etotal[0]) / atoms / picoseconds if finite else float("nan")
    spread = (max(etotal) - min(etotal)) / atoms if finite else float("nan")

    checks = [
        (f"held-out force RMSE {force_rmse:.4f} eV/A (per component, {len(reference)} "
         f"{options.label})", force_rmse <= options.force_target, f"<= {options.force_target:g}"),
        (f"held-out energy RMSE {energy_rmse:.3f} meV/atom", energy_rmse < options.energy_target,
         f"< {options.energy_target:g}"),
        (f"reference calls while the model drove: {model_calls:.0f} of {model_steps:.0f} steps "
         f"({100 * call_fraction:.2f}%)", model_steps > 0 and call_fraction <= 0.10, "<= 10%"),
        (f"NVE {picoseconds:g} ps with the learned model: finite {finite}, temperature "
         f"{min(temps):.0f}-{max(temps):.0f} K, drift {drift:.2e} eV/atom/ps, total-energy range "
         f"{spread:.2e} eV/atom", finite and max(temps) < 3000 and abs(drift) < 1e-3, "finite"),
    ]
    if options.max_calls > 0:
        calls = last["f_train[9]"]
        checks.append((f"reference calls in all: {calls:.0f} in {int(last['Step'])} steps",
                       calls <= options.max_calls, f"<= {options.max_calls}"))
    print(f"training: {int(last['Step'])} steps, the model drives from step "
          f"{hand_over.group(1) if hand_over else 'never'} ({take_overs} take-overs by the "
          f"reference after), "
          f"{last['f_train[7]']:.0f} optimizer steps, {last['f_train[9]']:.0f} reference calls, "
          f"validation force RMSE {last['f_train[3]']:.4f} eV/A, energy RMSE "
          f"{1000 * last['f_train[2]']:.3f} meV/atom")
    failed = 0
    for text, ok, target in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}  (target {target})")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

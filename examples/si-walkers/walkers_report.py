#!/usr/bin/env python3
"""Report of the walkers example (examples/si-walkers): per walker (temperature), the held-out
force RMSE per component and energy RMSE per atom of the shared model against Stillinger-Weber
(heldout-reference.K.dump against heldout-otf.K.dump), and the walker's reference calls; exits 1
when a walker misses the main example's targets (force RMSE <= 0.05 eV/A, energy RMSE < 2
meV/atom) or when the walkers' models were not identical (replicas_differ) or the total calls
pass --max-calls.

Interpreter: any Python 3 (standard library only).
usage: walkers_report.py [--prefix log.lammps] [--walkers 4] [--max-calls N] [--json OUT]"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from accuracy_report import dump_frames, thermo_runs  # noqa: E402

FORCE_TARGET = 0.05   # eV/A, the main example's (examples/si-sw)
ENERGY_TARGET = 2.0   # meV/atom


def heldout_errors(reference_path, model_path):
    """Force RMSE per component (eV/A), energy RMSE per atom (meV), largest force error."""
    reference, model = dump_frames(reference_path), dump_frames(model_path)
    if len(reference) != len(model) or not reference:
        raise SystemExit(f"{model_path}: {len(model)} snapshots for {len(reference)} held out")
    force_sq, components, energy_sq, largest = 0.0, 0, 0.0, 0.0
    for ref, mod in zip(reference, model):
        for atom, r in ref.items():
            for k in range(3):
                error = mod[atom][k] - r[k]
                force_sq += error * error
                largest = max(largest, abs(error))
            components += 3
        energy = (sum(m[3] for m in mod.values()) - sum(r[3] for r in ref.values())) / len(ref)
        energy_sq += energy * energy
    return (math.sqrt(force_sq / components), 1000.0 * math.sqrt(energy_sq / len(reference)),
            largest, len(reference))


def walker_results(folder, prefix, walkers):
    """Per walker number in `walkers`: its calls, buffer and held-out errors."""
    results = []
    for k in walkers:
        training = [run for run in thermo_runs(folder / f"{prefix}.{k}") if run
                    and "f_train[9]" in run[-1]][-1]
        last = training[-1]
        force, energy, largest, count = heldout_errors(folder / f"heldout-reference.{k}.dump",
                                                       folder / f"heldout-otf.{k}.dump")
        results.append({"walker": k, "steps": int(last["Step"]), "calls": int(last["f_train[9]"]),
                        "frames": int(last["f_train[8]"]),
                        "replicas_differ": int(last["f_train[12]"]),
                        "force_rmse": force, "energy_rmse_mev": energy,
                        "largest_force_error": largest, "configurations": count})
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", default=".")
    parser.add_argument("--prefix", default="log.lammps", help="partition logs PREFIX.K")
    parser.add_argument("--walkers", type=int, default=4)
    parser.add_argument("--temperatures", default="600 1000 1400 1800")
    parser.add_argument("--max-calls", type=int, default=0, help="0: no check")
    parser.add_argument("--json")
    options = parser.parse_args()
    temperatures = options.temperatures.split()
    results = walker_results(Path(options.folder), options.prefix, range(options.walkers))
    failed = 0
    for r, temperature in zip(results, temperatures):
        ok = r["force_rmse"] <= FORCE_TARGET and r["energy_rmse_mev"] < ENERGY_TARGET
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  walker {r['walker']} ({temperature} K): held-out force "
              f"RMSE {r['force_rmse']:.4f} eV/A (target <= {FORCE_TARGET}), energy RMSE "
              f"{r['energy_rmse_mev']:.3f} meV/atom (target < {ENERGY_TARGET}), largest force "
              f"error {r['largest_force_error']:.3f} eV/A, {r['configurations']} configurations; "
              f"{r['calls']} reference calls")
    total = sum(r["calls"] for r in results)
    frames = {r["frames"] for r in results}
    shared = frames == {total} and all(r["replicas_differ"] == 0 for r in results)
    failed += not shared
    print(f"{'PASS' if shared else 'FAIL'}  one model: every walker learned all {total} labels "
          f"(buffer frames {sorted(frames)}), replicas never differed")
    if options.max_calls > 0:
        ok = total <= options.max_calls
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  reference calls in all: {total} (target <= "
              f"{options.max_calls})")
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

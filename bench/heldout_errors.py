#!/usr/bin/python3
"""A model file against held-out reference data (LAMMPS dumps: id type x y z fx fy fz c_peatom,
sorted by id, with the box): force RMSE per component (all atoms and per element), energy RMSE
per atom, the largest force-component error, and how well the model's per-atom force
uncertainty predicts its errors on the same configurations: Spearman's rank correlation and
the fraction of atoms whose error vector is longer than the predicted 90% bound (for a Gaussian
error of the predicted size: 1.443 x the per-atom uncertainty, sqrt of the 90% quantile of
chi-squared with 3 degrees of freedom over 3), or the bound `fix otf/train` calibrated online
(--bound-factor Q: the "90% bound Q x spread" of its calibration line; a neural committee's raw
spread is not an error estimate, docs/design.md section 13.1).

Interpreter: Debian's /usr/bin/python3 with the otf_torch module of a build
(PYTHONPATH=<build>/install/lib/python3/dist-packages).
Usage: heldout_errors.py MODEL DUMP [DUMP ...] --elements Si [C ...] [--bound-factor Q] [--json OUT]
"""
import argparse
import json
import math
import sys

import numpy as np

import otf_torch

BOUND90 = math.sqrt(6.251388631170325 / 3.0)


def read_dump(path):
    """Frames of a LAMMPS text dump: (cell rows, types, positions, forces, per-atom energies)."""
    frames = []
    with open(path) as handle:
        lines = handle.read().splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("ITEM: TIMESTEP"):
            i += 1
            continue
        atoms = int(lines[i + 3])
        header = lines[i + 4].split()
        bounds = [list(map(float, lines[i + 5 + k].split())) for k in range(3)]
        if "xy" in header:
            raise SystemExit(f"{path}: triclinic dumps are not read here")
        lengths = [b[1] - b[0] for b in bounds]
        columns = lines[i + 8].split()[2:]
        data = np.array([list(map(float, lines[i + 9 + k].split())) for k in range(atoms)])
        col = {name: n for n, name in enumerate(columns)}
        frames.append({
            "cell": np.diag(lengths),
            "origin": np.array([b[0] for b in bounds]),
            "types": data[:, col["type"]].astype(int),
            "positions": data[:, [col["x"], col["y"], col["z"]]],
            "forces": data[:, [col["fx"], col["fy"], col["fz"]]],
            "energy": data[:, col["c_peatom"]].sum(),
        })
        i += 9 + atoms
    return frames


def spearman(a, b):
    def ranks(x):
        order = np.argsort(x, kind="mergesort")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        return r
    ra, rb = ranks(np.asarray(a)), ranks(np.asarray(b))
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def evaluate(model, frames, elements, bound_factor=BOUND90):
    errors, energy_errors, uncertainties, error_lengths, symbols_all = [], [], [], [], []
    for frame in frames:
        symbols = [elements[t - 1] for t in frame["types"]]
        out = model.evaluate(frame["positions"] - frame["origin"], symbols, frame["cell"],
                             force_uncertainty=True)
        difference = np.asarray(out["forces"]) - frame["forces"]
        errors.append(difference)
        energy_errors.append((out["energy"] - frame["energy"]) / len(symbols))
        uncertainties.append(np.asarray(out["force_uncertainties"]))
        error_lengths.append(np.linalg.norm(difference, axis=1))
        symbols_all += symbols
    errors = np.concatenate(errors)
    reference = np.concatenate([f["forces"] for f in frames])
    symbols_all = np.array(symbols_all)
    spread = np.concatenate(uncertainties)
    lengths = np.concatenate(error_lengths)
    result = {
        "configurations": len(frames),
        "force_rmse": float(np.sqrt(np.mean(errors ** 2))),
        "rms_force": float(np.sqrt(np.mean(reference ** 2))),
        "largest_force_error": float(np.abs(errors).max()),
        "energy_rmse_per_atom": float(np.sqrt(np.mean(np.square(energy_errors)))),
        "spearman_uncertainty_error": spearman(spread, lengths),
        "atoms_above_90_bound": float(np.mean(lengths > bound_factor * spread)),
        "per_element": {},
    }
    for element in elements:
        rows = symbols_all == element
        if rows.any():
            result["per_element"][element] = {
                "force_rmse": float(np.sqrt(np.mean(errors[rows] ** 2))),
                "rms_force": float(np.sqrt(np.mean(reference[rows] ** 2))),
            }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("dumps", nargs="+")
    parser.add_argument("--elements", nargs="+", required=True, help="element of each atom type")
    parser.add_argument("--bound-factor", type=float, default=BOUND90,
                        help="the 90%% bound in units of the per-atom uncertainty (default: "
                             "%(default).3f, a Gaussian error of that size)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    otf_torch.set_num_threads(1)
    model = otf_torch.Model(args.model)
    results = {}
    for path in args.dumps:
        r = evaluate(model, read_dump(path), args.elements, args.bound_factor)
        results[path] = r
        per_element = "  ".join(
            f"{e} {v['force_rmse']:.4f} ({100 * v['force_rmse'] / v['rms_force']:.1f}%)"
            for e, v in r["per_element"].items())
        print(f"{path}: {r['configurations']} configurations: force RMSE {r['force_rmse']:.4f} "
              f"eV/A ({100 * r['force_rmse'] / r['rms_force']:.1f}% of {r['rms_force']:.3f}), "
              f"per element {per_element}; energy RMSE {1000 * r['energy_rmse_per_atom']:.3f} "
              f"meV/atom; largest component error {r['largest_force_error']:.3f}; uncertainty: "
              f"Spearman {r['spearman_uncertainty_error']:.2f}, "
              f"{100 * r['atoms_above_90_bound']:.1f}% of atoms above the 90% bound "
              f"({args.bound_factor:.3f} x uncertainty)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

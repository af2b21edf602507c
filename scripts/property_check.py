#!/usr/bin/python3
"""The property checks users run after training: a learned model against its reference on the
lattice constant and bulk modulus (equation of state), phonons (band structure and density of
states, ase.phonons) and forces on held-out frames (parity plot), written as PNGs and a Markdown
summary. Defaults fit the main example (examples/si-sw: silicon learned from Stillinger-Weber):

    bash examples/si-sw/run.sh        # writes si.otf and heldout-reference.dump
    PYTHONPATH=build/install/lib/python3/dist-packages \\
        /usr/bin/python3 scripts/property_check.py --model examples/si-sw/si.otf \\
        --heldout examples/si-sw/heldout-reference.dump --out docs/property-check

The reference is scripts/stillinger_weber.py (exact SW, checked against lmp's pair_style sw:
python3 scripts/stillinger_weber.py --lmp LMP).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ase import Atoms, units  # noqa: E402
from ase.build import bulk  # noqa: E402
from ase.eos import EquationOfState  # noqa: E402
from ase.phonons import Phonons  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stillinger_weber import StillingerWeber  # noqa: E402

import otf_torch  # noqa: E402
from otf_torch import OTFCalculator  # noqa: E402

EV_PER_A3_TO_GPA = 1.0 / units.GPa
THZ_PER_EV = 1.0 / (units._hplanck / units._e * 1e12)  # a phonon energy in eV as a frequency


def equation_of_state(calculator, lattice_guess):
    """Birch-Murnaghan fit of E(V) of the 2-atom diamond cell over +-6% in lattice constant."""
    volumes, energies = [], []
    for scale in np.linspace(0.94, 1.06, 13):
        atoms = bulk("Si", "diamond", a=lattice_guess * scale)
        atoms.calc = calculator
        volumes.append(atoms.get_volume())
        energies.append(atoms.get_potential_energy())
    eos = EquationOfState(volumes, energies, eos="birchmurnaghan")
    v0, e0, b0 = eos.fit()
    return {"volumes": volumes, "energies": energies, "lattice_constant": (4 * v0) ** (1 / 3),
            "bulk_modulus_GPa": b0 * EV_PER_A3_TO_GPA, "energy_per_atom": e0 / 2, "eos": eos}


def phonons(calculator, lattice_constant, folder, label):
    """ase.phonons on the primitive cell (4x4x4 supercell), along G-X-W-K-G-L, and the DOS."""
    atoms = bulk("Si", "diamond", a=lattice_constant)
    ph = Phonons(atoms, calculator, supercell=(4, 4, 4), delta=0.01,
                 name=str(Path(folder) / f"phonon-{label}"))
    ph.run()
    ph.read(acoustic=True)
    ph.clean()
    path = atoms.cell.bandpath("GXWKGL", npoints=120)
    bands = ph.get_band_structure(path)
    dos = ph.get_dos(kpts=(16, 16, 16)).sample_grid(npts=300, width=2e-3)
    special = {name: ph.band_structure([point])[0] * THZ_PER_EV
               for name, point in path.special_points.items() if name in "GXL"}
    return {"bands": bands, "dos": dos, "special": special}


def read_dump_frames(path):
    """Frames of a LAMMPS `dump custom ... id type x y z fx fy fz c_peatom` (orthogonal box)."""
    frames = []
    lines = Path(path).read_text().splitlines()
    k = 0
    while k < len(lines):
        if lines[k].startswith("ITEM: NUMBER OF ATOMS"):
            count = int(lines[k + 1])
            bounds = [[float(w) for w in lines[k + 3 + d].split()[:2]] for d in range(3)]
            columns = lines[k + 6].split()[2:]
            rows = np.array([[float(w) for w in line.split()] for line in lines[k + 7:k + 7 + count]])
            rows = rows[np.argsort(rows[:, columns.index("id")])]
            column = {name: rows[:, n] for n, name in enumerate(columns)}
            frames.append({"cell": np.diag([hi - lo for lo, hi in bounds]),
                           "positions": np.stack([column[c] for c in "xyz"], axis=1),
                           "forces": np.stack([column[f"f{c}"] for c in "xyz"], axis=1),
                           "energies": column.get("c_peatom")})
            k += 7 + count
        else:
            k += 1
    if not frames:
        raise SystemExit(f"{path}: no frames (expected a LAMMPS dump custom with x y z fx fy fz)")
    return frames


def held_out_forces(model, frames):
    reference, predicted, uncertainty, energy_ref, energy_model = [], [], [], [], []
    for frame in frames:
        out = model.evaluate(frame["positions"], ["Si"] * len(frame["positions"]), frame["cell"],
                             force_uncertainty=True)
        reference.append(frame["forces"])
        predicted.append(out["forces"])
        uncertainty.append(out["force_uncertainties"])
        if frame["energies"] is not None:
            energy_ref.append(frame["energies"].mean())
            energy_model.append(out["energy"] / len(frame["positions"]))
    reference, predicted = np.concatenate(reference), np.concatenate(predicted)
    return {"reference": reference, "predicted": predicted, "uncertainty": np.concatenate(uncertainty),
            "rmse": float(np.sqrt(np.mean((predicted - reference) ** 2))),
            "energy_rmse_meV": float(1000 * np.sqrt(np.mean((np.array(energy_model) -
                                                             np.array(energy_ref)) ** 2)))
            if energy_ref else None, "frames": len(frames)}


def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def plot_eos(results, out):
    fig, ax = plt.subplots(figsize=(5, 4))
    for label, r, style in (("Stillinger-Weber", results["reference"]["eos"], "o"),
                            ("learned model", results["model"]["eos"], "s")):
        ax.plot(np.array(r["volumes"]) / 2, np.array(r["energies"]) / 2, style, label=label)
        v = np.linspace(min(r["volumes"]), max(r["volumes"]), 200)
        fitted = r["eos"]
        ax.plot(v / 2, fitted.func(v, *fitted.eos_parameters) / 2, "-", color=ax.lines[-1].get_color())
    ax.set_xlabel("volume (Å³/atom)")
    ax.set_ylabel("energy (eV/atom)")
    ax.legend()
    ax.set_title("Si diamond: equation of state")
    fig.tight_layout()
    fig.savefig(out / "eos.png", dpi=120)
    plt.close(fig)


def plot_phonons(results, out):
    fig, (ax, ax_dos) = plt.subplots(1, 2, figsize=(9, 4), gridspec_kw={"width_ratios": [3, 1]},
                                     sharey=True)
    for label, key, color in (("Stillinger-Weber", "reference", "k"), ("learned model", "model", "C1")):
        bands = results[key]["phonons"]["bands"]
        x, xticks, xlabels = bands.path.get_linear_kpoint_axis()
        energies = bands.energies[0] * THZ_PER_EV
        for n in range(energies.shape[1]):
            ax.plot(x, energies[:, n], color=color, lw=1, label=label if n == 0 else None)
        dos = results[key]["phonons"]["dos"]
        ax_dos.plot(dos.get_weights(), dos.get_energies() * THZ_PER_EV, color=color)
    ax.set_xticks(xticks)
    ax.set_xticklabels(["Γ" if name == "G" else name for name in xlabels])
    for tick in xticks:
        ax.axvline(tick, color="0.8", lw=0.5)
    ax.set_xlim(x[0], x[-1])
    ax.set_ylabel("frequency (THz)")
    ax.legend(loc="lower right")
    ax.set_title("phonons (ase.phonons, 4x4x4 supercell)")
    ax_dos.set_xlabel("DOS")
    ax_dos.set_xticks([])
    fig.tight_layout()
    fig.savefig(out / "phonons.png", dpi=120)
    plt.close(fig)


def plot_parity(held_out, out):
    fig, (ax, ax_u) = plt.subplots(1, 2, figsize=(9, 4))
    reference, predicted = held_out["reference"].ravel(), held_out["predicted"].ravel()
    ax.plot(reference, predicted, ".", ms=2, alpha=0.5)
    limit = 1.05 * np.abs(reference).max()
    ax.plot([-limit, limit], [-limit, limit], "k-", lw=0.5)
    ax.set_xlabel("Stillinger-Weber force component (eV/Å)")
    ax.set_ylabel("learned model (eV/Å)")
    ax.set_title(f"{held_out['frames']} held-out frames: RMSE {held_out['rmse']:.4f} eV/Å")
    error = np.linalg.norm(held_out["predicted"] - held_out["reference"], axis=1)
    ax_u.plot(held_out["uncertainty"], error, ".", ms=2, alpha=0.5)
    ax_u.set_xlabel("committee force uncertainty per atom (eV/Å)")
    ax_u.set_ylabel("|force error| per atom (eV/Å)")
    ax_u.set_title("uncertainty against actual error")
    fig.tight_layout()
    fig.savefig(out / "force-parity.png", dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="examples/si-sw/si.otf")
    parser.add_argument("--heldout", default="examples/si-sw/heldout-reference.dump",
                        help="held-out frames with reference forces (LAMMPS dump custom)")
    parser.add_argument("--precision", default=None, help="float32 (default), bfloat16, float16")
    parser.add_argument("--out", default="docs/property-check", help="folder for PNGs and summary")
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    model = otf_torch.Model(options.model, precision=options.precision)
    print(model)
    calculators = {"reference": StillingerWeber(),
                   "model": OTFCalculator(model, force_uncertainty=False)}
    results = {}
    start = time.perf_counter()
    for key, calculator in calculators.items():
        eos = equation_of_state(calculator, 5.431)
        results[key] = {"eos": eos, "phonons": phonons(calculator, eos["lattice_constant"], out, key)}
        print(f"{key}: a0 {eos['lattice_constant']:.4f} A, B {eos['bulk_modulus_GPa']:.1f} GPa, "
              f"phonons at G/X/L (THz): " + ", ".join(
                  f"{name} {np.round(values.max(), 2)}" for name, values in
                  results[key]["phonons"]["special"].items()))
    held_out = held_out_forces(model, read_dump_frames(options.heldout))
    seconds = time.perf_counter() - start
    plot_eos(results, out)
    plot_phonons(results, out)
    plot_parity(held_out, out)

    def row(name, unit, ref, mod):
        return f"| {name} | {ref:.4g} | {mod:.4g} | {100 * (mod - ref) / ref:+.2f}% | {unit} |"

    ref, mod = results["reference"], results["model"]
    lines = [f"# Property check: `{options.model}` against Stillinger-Weber", "",
             f"Model: {model!r}.", "",
             f"Written by `scripts/property_check.py` on {cpu_name()} "
             f"({os.cpu_count()} CPUs), {seconds:.0f} s, OTF-Torch {otf_torch.__version__}, "
             f"LibTorch {otf_torch.torch_version}.", "",
             "| property | Stillinger-Weber | learned | difference | unit |", "|---|---|---|---|---|",
             row("lattice constant", "Å", ref["eos"]["lattice_constant"], mod["eos"]["lattice_constant"]),
             row("bulk modulus", "GPa", ref["eos"]["bulk_modulus_GPa"], mod["eos"]["bulk_modulus_GPa"]),
             row("cohesive energy", "eV/atom", ref["eos"]["energy_per_atom"],
                 mod["eos"]["energy_per_atom"])]
    for name in ("G", "X", "L"):
        r, m = ref["phonons"]["special"][name], mod["phonons"]["special"][name]
        lines.append(row(f"highest phonon at {'Γ' if name == 'G' else name}", "THz", r.max(), m.max()))
        if name != "G":
            lines.append(row(f"lowest phonon at {name}", "THz", r.min(), m.min()))
    lines += ["", "The main example trains at one density (NVT at a = 5.431 Å): away from it the "
              "equation of state is extrapolated, which is what the lattice constant and bulk "
              "modulus measure; add strained cells to the training (or a barostat) to learn them.",
              "", f"Held-out forces ({held_out['frames']} frames of `{options.heldout}`): RMSE "
              f"{held_out['rmse']:.4f} eV/Å per component" +
              (f", energy RMSE {held_out['energy_rmse_meV']:.3f} meV/atom" if held_out["energy_rmse_meV"]
               is not None else "") + ".", "",
              "![equation of state](eos.png)", "", "![phonons](phonons.png)", "",
              "![force parity](force-parity.png)", ""]
    (out / "README.md").write_text("\n".join(lines))
    summary = {"lattice_constant": [ref["eos"]["lattice_constant"], mod["eos"]["lattice_constant"]],
               "bulk_modulus_GPa": [ref["eos"]["bulk_modulus_GPa"], mod["eos"]["bulk_modulus_GPa"]],
               "heldout_force_rmse": held_out["rmse"],
               "heldout_energy_rmse_meV": held_out["energy_rmse_meV"]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("\n".join(lines[6:]))
    print(f"written: {out}/README.md, eos.png, phonons.png, force-parity.png, summary.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Energy conservation of pair_style otf: 10 ps of NVE (1 fs steps) of a 64-atom Si crystal at
1200 K with an untrained but smooth model (float64 and float32 parameters), reporting the drift of
the total energy (slope of a least-squares line) in eV per atom per ps and its range.

Usage: nve_drift.py --lmp LMP --plugin otfplugin.so [--ps 10] [--out docs/pair-otf-nve-drift.txt]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--ps", type=float, default=10.0)
    parser.add_argument("--out")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nve-drift-"))
    steps = int(round(args.ps / 0.001))
    lines = [f"# NVE, 64 Si atoms (2x2x2 diamond cells), 1200 K start, 1 fs steps, {args.ps:g} ps, "
             "untrained model (cutoff 4.5 A, hidden [16, 16])"]
    for dtype in ("float64", "float32"):
        spec = work / f"spec-{dtype}.json"
        spec.write_text(json.dumps({"elements": ["Si"], "cutoff": 4.5, "dtype": dtype,
                                    "hyperparameters": {"hidden": [16, 16]}}))
        script = work / f"in.{dtype}"
        script.write_text(f"""plugin load {args.plugin}
units metal
lattice diamond 5.431
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 28.0855
pair_style otf {spec}
pair_coeff * * Si
velocity all create 1200 12345 loop geom
timestep 0.001
fix nve all nve
thermo_style custom step time temp etotal
thermo_modify format float %.15g
thermo 100
run {steps}
""")
        done = subprocess.run([args.lmp, "-in", str(script), "-log", str(work / f"log.{dtype}"),
                               "-screen", "none"], cwd=work, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(done.stdout + done.stderr)
        rows, header = [], None
        for line in (work / f"log.{dtype}").read_text().splitlines():
            words = line.split()
            if words[:1] == ["Step"]:
                header = words
            elif header and len(words) == len(header):
                try:
                    rows.append(dict(zip(header, map(float, words))))
                except ValueError:
                    pass
        time = [r["Time"] for r in rows]
        energy = [r["TotEng"] / 64 for r in rows]
        temps = [r["Temp"] for r in rows]
        lines.append(f"{dtype}: drift {slope(time, energy):+.2e} eV/atom/ps, total energy range "
                     f"{max(energy) - min(energy):.2e} eV/atom, T {min(temps):.0f}..{max(temps):.0f} K")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()

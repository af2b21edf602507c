#!/usr/bin/python3
"""Label held-out configurations with CP2K (Debian's /usr/bin/python3, standard library only).

  /usr/bin/python3 label_heldout.py heldout-1000K.dump heldout-1000K.extxyz

Each configuration of the LAMMPS dump (id type x y z, orthogonal box; types 1 = Si, 2 = C) becomes
a CP2K single-point calculation with the DFT settings of the training run (cp2k-client.sh:
../si-cp2k/make_cp2k_input.py, PBE, GTH-PBE-q4, DZVP-MOLOPT-SR-GTH, 400 Ry), and its energy,
forces and virial are appended to the extxyz file in the label journal's format (the examples'
reports read both with the same reader). A frame is appended whole and flushed before the next
calculation starts; frames already in the file (by step) are not computed again, and a frame cut
short by an interruption is removed, so an interrupted labelling continues where it stopped.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CP2K_INPUT = HERE.parent / "si-cp2k" / "make_cp2k_input.py"
CP2K_OUTPUT = HERE.parent / "si-cp2k" / "parse_cp2k_output.py"
ELEMENTS = ["Si", "C"]
MASSES = {"Si": 28.0855, "C": 12.011}
# The training run's settings (cp2k-client.sh).
SETTINGS = ["--elements", *ELEMENTS, "--cutoff", "400", "--rel-cutoff", "50"]


def read_dump(path):
    """Snapshots of a dump custom id type x y z: (step, [lo, hi] per axis, rows sorted by id)."""
    lines = Path(path).read_text().splitlines()
    snapshots, i = [], 0
    while i < len(lines):
        if lines[i] != "ITEM: TIMESTEP":
            raise ValueError(f"{path}: expected ITEM: TIMESTEP at line {i + 1}")
        step = int(lines[i + 1])
        count = int(lines[i + 3])
        if not lines[i + 4].startswith("ITEM: BOX BOUNDS pp pp pp"):
            raise ValueError(f"{path}: only orthogonal periodic boxes are supported")
        bounds = [[float(w) for w in lines[i + 5 + k].split()[:2]] for k in range(3)]
        header = lines[i + 8].split()[2:]
        if header[:5] != ["id", "type", "x", "y", "z"]:
            raise ValueError(f"{path}: columns must start with id type x y z, got {header}")
        rows = sorted((int(w[0]), int(w[1]), float(w[2]), float(w[3]), float(w[4]))
                      for w in (line.split() for line in lines[i + 9:i + 9 + count]))
        snapshots.append((step, bounds, rows))
        i += 9 + count
    return snapshots


def labelled_steps(path):
    """Steps already labelled in the extxyz file. A frame cut short by an interrupted write is
    removed first (truncated away), so that the frames appended after it stay readable."""
    if not Path(path).exists():
        return set()
    text = Path(path).read_text()
    lines = text.splitlines(keepends=True)
    complete, i = 0, 0
    while i < len(lines) and lines[i].strip().isdigit():
        end = i + 2 + int(lines[i])
        if end > len(lines) or not lines[end - 1].endswith("\n"):
            break
        complete, i = sum(len(line) for line in lines[:end]), end
    if complete < len(text):
        with open(path, "r+") as handle:
            handle.truncate(len(text[:complete].encode()))
    sys.path.insert(0, str(HERE.parent.parent / "tests" / "lammps"))
    from ipi_common import read_journal
    return {frame["step"] for frame in read_journal(path)}


def write_data(path, bounds, rows):
    with open(path, "w") as out:
        out.write("held-out configuration (label_heldout.py)\n\n")
        out.write(f"{len(rows)} atoms\n{len(ELEMENTS)} atom types\n\n")
        for (lo, hi), axis in zip(bounds, "xyz"):
            out.write(f"{lo!r} {hi!r} {axis}lo {axis}hi\n")
        out.write("\nMasses\n\n")
        for t, element in enumerate(ELEMENTS, 1):
            out.write(f"{t} {MASSES[element]}\n")
        out.write("\nAtoms # atomic\n\n")
        for atom_id, atom_type, x, y, z in rows:
            out.write(f"{atom_id} {atom_type} {x!r} {y!r} {z!r}\n")


def single_point(bounds, rows, settings, cp2k="cp2k"):
    """CP2K's energy, forces and virial of one configuration (parse_cp2k_output.py's JSON), one
    core, from the atomic guess. Raises when the SCF did not converge."""
    with tempfile.TemporaryDirectory(prefix="sic64-dft-") as work:
        data, inp, out = (Path(work) / name for name in ("c.data", "c.inp", "c.out"))
        write_data(data, bounds, rows)
        subprocess.run([sys.executable, str(CP2K_INPUT), str(data), "--mode", "single-point",
                        "--project", "single-point", "-o", str(inp), *settings], check=True)
        subprocess.run([cp2k, "-i", str(inp), "-o", str(out)], cwd=work, check=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL)
        if "SCF run NOT converged" in out.read_text():
            raise RuntimeError("CP2K's SCF did not converge")
        text = subprocess.run([sys.executable, str(CP2K_OUTPUT), str(out), "--data", str(data)],
                              check=True, capture_output=True, text=True).stdout
        return json.loads(text)


def extxyz_frame(step, bounds, rows, label):
    lengths = [hi - lo for lo, hi in bounds]
    lattice = f"{lengths[0]!r} 0 0 0 {lengths[1]!r} 0 0 0 {lengths[2]!r}"
    v = label["virial_ev"]
    virial = " ".join(repr(v[a][b]) for a in range(3) for b in range(3))
    origin = " ".join(repr(lo) for lo, _ in bounds)
    lines = [str(len(rows)),
             f'Lattice="{lattice}" Properties=species:S:1:pos:R:3:forces:R:3:id:I:1 '
             f'energy={label["energy_ev"]!r} virial="{virial}" pbc="T T T" origin="{origin}" '
             f'step={step} units=metal reference="CP2K single point (label_heldout.py)"']
    for (atom_id, atom_type, x, y, z), force in zip(rows, label["forces_ev_a"]):
        lines.append(f"{ELEMENTS[atom_type - 1]} {x!r} {y!r} {z!r} "
                     f"{force[0]!r} {force[1]!r} {force[2]!r} {atom_id}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", help="configurations (dump custom id type x y z)")
    parser.add_argument("extxyz", help="labels to append to")
    parser.add_argument("--cp2k", default="cp2k", help="CP2K executable (default: cp2k)")
    args = parser.parse_args(argv)
    done = labelled_steps(args.extxyz)
    for step, bounds, rows in read_dump(args.dump):
        if step in done:
            continue
        label = single_point(bounds, rows, SETTINGS, args.cp2k)
        with open(args.extxyz, "a") as journal:
            journal.write(extxyz_frame(step, bounds, rows, label))
            journal.flush()
            os.fsync(journal.fileno())
        print(f"{args.extxyz}: step {step} labelled", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared pieces of the pair_style otf integration tests: small model specs, data files of
jittered two-element crystals (orthogonal or triclinic), and readers for dumps and printed values.
"""

import json
import math
import random
import re

from pathlib import Path

from lammps_harness import expect, fail, run_lammps

# A small, fast model; float64 for exactness tests (float32 is the spec default).
SMALL_HYPERPARAMETERS = {"hidden": [16, 16], "radial_functions": 6, "angular_radial_functions": 3}


def write_spec(ctx, name, *, elements=("Si", "C"), cutoff=4.0, dtype="float64", units="metal",
               committee_size=4, seed=7, hyperparameters=None):
    spec = {
        "elements": list(elements),
        "cutoff": cutoff,
        "units": units,
        "committee_size": committee_size,
        "dtype": dtype,
        "seed": seed,
        "hyperparameters": hyperparameters or SMALL_HYPERPARAMETERS,
    }
    path = ctx.workdir / name
    path.write_text(json.dumps(spec, indent=2) + "\n")
    return path


# Diamond-cubic basis in fractional coordinates of the conventional cell.
DIAMOND_BASIS = [(0, 0, 0), (0, 0.5, 0.5), (0.5, 0, 0.5), (0.5, 0.5, 0),
                 (0.25, 0.25, 0.25), (0.25, 0.75, 0.75), (0.75, 0.25, 0.75), (0.75, 0.75, 0.25)]


def write_crystal(ctx, name, *, cells=(2, 2, 2), lattice=5.43, jitter=0.15, tilt=(0.0, 0.0, 0.0),
                  types=2, seed=1, triclinic=None, vacuum_x=0.0, offset_x=0.0,
                  masses=(28.0855, 12.011)):
    """A diamond crystal of cells[0] x cells[1] x cells[2] conventional cells, positions jittered,
    types drawn at random (1..types). tilt = (xy, xz, yz) in units of the lattice constant makes a
    triclinic box; vacuum_x widens the box along x so that the atoms fill only part of it."""
    rng = random.Random(seed)
    lx, ly, lz = (c * lattice for c in cells)
    xy, xz, yz = (t * lattice for t in tilt)
    triclinic = any(tilt) if triclinic is None else triclinic
    atoms = []
    for i in range(cells[0]):
        for j in range(cells[1]):
            for k in range(cells[2]):
                for bx, by, bz in DIAMOND_BASIS:
                    # fractional coordinates of the crystal box, then Cartesian through the tilt
                    fx, fy, fz = (i + bx) / cells[0], (j + by) / cells[1], (k + bz) / cells[2]
                    x = fx * lx + fy * xy + fz * xz + offset_x + rng.uniform(-jitter, jitter)
                    y = fy * ly + fz * yz + rng.uniform(-jitter, jitter)
                    z = fz * lz + rng.uniform(-jitter, jitter)
                    atoms.append((rng.randint(1, types), x, y, z))
    lines = [f"{name}: jittered diamond crystal, {len(atoms)} atoms", "",
             f"{len(atoms)} atoms", f"{types} atom types", "",
             f"0.0 {lx + vacuum_x!r} xlo xhi", f"0.0 {ly!r} ylo yhi", f"0.0 {lz!r} zlo zhi"]
    if triclinic:
        lines.append(f"{xy!r} {xz!r} {yz!r} xy xz yz")
    lines += ["", "Masses", ""]
    lines += [f"{t} {masses[(t - 1) % len(masses)]}" for t in range(1, types + 1)]
    lines += ["", "Atoms # atomic", ""]
    lines += [f"{n} {t} {x!r} {y!r} {z!r}" for n, (t, x, y, z) in enumerate(atoms, start=1)]
    path = ctx.workdir / name
    path.write_text("\n".join(lines) + "\n")
    return path, len(atoms)


def plugin_header(ctx, *, units="metal", newton="on"):
    return (f"plugin load {ctx.plugin}\n"
            f"units {units}\natom_style atomic\natom_modify map array\nnewton {newton}\n")


def read_values(log, tag):
    """Values printed by `print "<tag> v1 v2 ..."` lines (the echo of the command is skipped)."""
    rows = []
    for line in log.splitlines():
        words = line.split()
        if words and words[0] == tag:
            try:
                rows.append([float(w) for w in words[1:]])
            except ValueError:
                pass  # the echoed print command itself
    if not rows:
        fail(f"no '{tag}' line in the log; tail:\n{log[-2000:]}")
    return rows


def read_dump(path):
    """The last snapshot of a `dump custom` file: {id: [columns after id]} and the column names."""
    text = path.read_text()
    snapshots = text.split("ITEM: TIMESTEP")
    last = snapshots[-1].splitlines()
    header_index = next(i for i, line in enumerate(last) if line.startswith("ITEM: ATOMS"))
    columns = last[header_index].split()[2:]
    rows = {}
    for line in last[header_index + 1:]:
        words = line.split()
        if len(words) == len(columns):
            rows[int(words[0])] = [float(w) for w in words[1:]]
    return rows, columns[1:]


def max_abs(values):
    return max((abs(v) for v in values), default=0.0)


def relative_error(actual, expected):
    """max |actual - expected| / max |expected| over two equally long sequences."""
    scale = max_abs(expected)
    diff = max((abs(a - e) for a, e in zip(actual, expected)), default=0.0)
    return diff / scale if scale > 0 else diff


def relative_norm_error(actual, expected):
    """|actual - expected| / |expected| in the Euclidean norm (all components together)."""
    scale = math.sqrt(sum(e * e for e in expected))
    diff = math.sqrt(sum((a - e) ** 2 for a, e in zip(actual, expected)))
    return diff / scale if scale > 0 else diff


def finite(values):
    return all(math.isfinite(v) for v in values)


def last_float(pattern, text):
    matches = re.findall(pattern, text, re.MULTILINE)
    if not matches:
        fail(f"no match for {pattern!r}; tail:\n{text[-2000:]}")
    return float(matches[-1])


# fix otf/train tests: a small LJ argon crystal (32 atoms) learned from lj/cut by a small model.
ARGON_LJ_REFERENCE = 'reference "lj/cut 8.5" coeff "* * 0.0104 3.405"'


def write_argon_spec(ctx, name="argon.json", *, cutoff=5.0, seed=3):
    return write_spec(ctx, name, elements=("Ar",), cutoff=cutoff, dtype="float32",
                      committee_size=2, seed=seed)


def argon_script(ctx, spec, *, fix="", steps=100, thermo=10, temperature=60, cells=2,
                 extra=""):
    """LJ argon fcc (4 x cells^3 atoms, jittered, seeded), pair_style otf with `spec`, NVE; `fix`
    is the text after `fix t all otf/train` (empty: no training fix)."""
    text = (f"plugin load {ctx.plugin}\nunits metal\natom_style atomic\natom_modify map array\n"
            f"lattice fcc 5.26\nregion box block 0 {cells} 0 {cells} 0 {cells}\n"
            f"create_box 1 box\ncreate_atoms 1 box\nmass 1 39.948\n"
            f"displace_atoms all random 0.1 0.1 0.1 4 units box\n"
            f"velocity all create {temperature} 7 loop geom\n"
            f"pair_style otf {spec}\npair_coeff * * Ar\nfix nve all nve\ntimestep 0.002\n")
    columns = "step temp pe"
    if fix:
        text += f"fix t all otf/train {fix}\n"
        columns += " " + " ".join(f"f_t[{i}]" for i in range(1, 20))
    text += f"thermo_style custom {columns}\nthermo_modify format float %.10g\nthermo {thermo}\n"
    text += extra + f"run {steps}\n"
    return text


def run_fix(ctx, label, fix, *, spec, pair=None):
    """A 0-step argon run with `fix t all otf/train <fix>` (pair: replaces the otf pair lines)."""
    script = argon_script(ctx, spec, fix=fix, steps=0)
    if pair:
        script = script.replace(f"pair_style otf {spec}\npair_coeff * * Ar\n", pair)
    return run_lammps(ctx, script, name=f"in.{label}", check=False)


def expect_fix_error(ctx, label, fix, *messages, spec, pair=None):
    result = run_fix(ctx, label, fix, spec=spec, pair=pair)
    output = result.stdout + result.stderr + result.log
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    expect(result.returncode != 0 and errors, f"{label}: no error; tail:\n{output[-1500:]}")
    for message in messages:
        if not any(message in line for line in errors):
            fail(f"{label}: no ERROR line contains {message!r}:\n" + "\n".join(errors))
    for bad in ("Segmentation fault", "terminate called", "core dumped"):
        expect(bad not in output, f"{label}: crashed ({bad})")
    print(f"{label}: {errors[0]}")


def fix_output(name, fix_id="t"):
    """The thermo name f_<fix_id>[N] of fix otf/train's output `name`: its position in the list of
    doc/fix_otf_train.md, which a unit test checks against the training layer's named table
    (training/trainer_outputs.h)."""
    doc = Path(__file__).resolve().parents[2] / "doc" / "fix_otf_train.md"
    for line in doc.read_text().splitlines():
        match = re.match(r"^(\d+)\. `([a-z_]+)`:", line)
        if match and match.group(2) == name:
            return f"f_{fix_id}[{match.group(1)}]"
    fail(f"fix otf/train has no output named {name!r} (doc/fix_otf_train.md)")


#!/usr/bin/python3
"""The Python module (otf_torch.Model) against pair_style otf on the same configurations: energy,
forces, global and per-atom virials and per-atom energies agree to 1e-10 relative for a float64
model and 1e-5 for a float32 one, in orthogonal and triclinic cells, with one and two elements;
bfloat16 and float16 agree with pair_style otf's own (same autocast path) and differ from float32.
A non-periodic cluster equals the same atoms in a periodic box with wide vacuum.

Run by CTest (tests/python/CMakeLists.txt) with Debian's python3 and PYTHONPATH=<build>/python.
"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lammps"))

import numpy as np  # noqa: E402

import otf_torch  # noqa: E402
from lammps_harness import expect, main, run_lammps  # noqa: E402
from pair_otf_common import plugin_header, read_dump, read_values, write_crystal, write_spec  # noqa: E402

NKTV2P_METAL = 1.6021765e6  # LAMMPS' pressure conversion of metal units (update.cpp)
TOLERANCE = {"float64": 1e-10, "float32": 1e-5, "bfloat16": 2e-2, "float16": 2e-3}


def lammps_results(ctx, label, data, spec, elements, precision_words=""):
    """pair_style otf's energy, virial, and per atom: type, position, force, energy, virial."""
    dump = ctx.workdir / f"{label}.dump"
    box = "$(lx) $(ly) $(lz) $(xy) $(xz) $(yz)"
    script = "\n".join([
        plugin_header(ctx), f"read_data {data}",
        f"pair_style otf {spec} {precision_words}", f"pair_coeff * * {' '.join(elements)}",
        "compute pe all pe/atom", "compute stress all stress/atom NULL virial",
        "compute virial all pressure NULL virial",
        "thermo_style custom step pe c_virial[1]",
        f"dump d all custom 1 {dump} id type x y z fx fy fz c_pe c_stress[*]",
        "dump_modify d format float %.17g sort id", "run 0",
        "print \"TOTALS $(pe:%.17g) " + " ".join(f"$(c_virial[{k}]*vol:%.17g)" for k in range(1, 7))
        + "\"",
        f"print \"BOX {box}\""]) + "\n"
    result = run_lammps(ctx, script, name=f"in.{label}")
    totals = read_values(result.log, "TOTALS")[-1]
    lx, ly, lz, xy, xz, yz = read_values(result.log, "BOX")[-1]
    atoms, _ = read_dump(dump)
    rows = np.array([atoms[i] for i in sorted(atoms)])
    # LAMMPS' virial order xx yy zz xy xz yz; compute pressure gives W/V in pressure units, and
    # stress/atom gives -W_i in pressure x volume units.
    return {"energy": totals[0], "virial": np.array(totals[1:7]) / NKTV2P_METAL,
            "symbols": [elements[int(t) - 1] for t in rows[:, 0]], "positions": rows[:, 1:4],
            "forces": rows[:, 4:7], "energies": rows[:, 7],
            "atom_virials": -rows[:, 8:14] / NKTV2P_METAL,
            "cell": np.array([[lx, 0, 0], [xy, ly, 0], [xz, yz, lz]])}


def relative(actual, expected):
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    scale = np.max(np.abs(expected))
    return float(np.max(np.abs(actual - expected)) / scale)


def compare(label, python, lammps, tolerance):
    errors = {what: relative(python[what], lammps[what])
              for what in ("energy", "forces", "virial", "energies", "atom_virials")}
    print(f"{label}: relative differences " +
          ", ".join(f"{what} {error:.2g}" for what, error in errors.items()) +
          f" (tolerance {tolerance:g})")
    for what, error in errors.items():
        expect(math.isfinite(error) and error <= tolerance,
               f"{label}: {what} differ from pair_style otf by {error:.3g} relative (> {tolerance:g})")
    return errors


def check_case(ctx, label, *, dtype, elements, tilt, cells):
    data, _ = write_crystal(ctx, f"{label}.data", cells=cells, tilt=tilt, types=len(elements),
                            seed=len(label))
    spec = write_spec(ctx, f"{label}.json", elements=elements, dtype=dtype)
    model = otf_torch.Model(spec)
    expect(model.precision == dtype, f"{label}: model precision {model.precision}, expected {dtype}")
    reference = lammps_results(ctx, label, data, spec, elements)
    python = model.evaluate(reference["positions"], reference["symbols"], reference["cell"])
    compare(f"{label} ({dtype})", python, reference, TOLERANCE[dtype])
    expect(abs(python["virial"] - python["atom_virials"].sum(axis=0)).max()
           <= 1e-9 * abs(python["virial"]).max(), f"{label}: per-atom virials do not sum up")
    return data, spec, reference, python


def check_lower_precisions(ctx, data, spec, elements, float32_python):
    for precision in ("bfloat16", "float16"):
        model = otf_torch.Model(spec, precision=precision)
        reference = lammps_results(ctx, f"triclinic-{precision}", data, spec, elements,
                                   f"precision {precision}")
        python = model.evaluate(reference["positions"], reference["symbols"], reference["cell"])
        compare(f"triclinic two elements ({precision})", python, reference, TOLERANCE[precision])
        change = relative(python["forces"], float32_python["forces"])
        expect(change > 1e-7, f"{precision}: forces identical to float32; is the precision used?")


def check_cluster(ctx, spec):
    """No periodicity: a cluster equals the same atoms in a periodic box with 20 A of vacuum."""
    model = otf_torch.Model(spec)
    rng = np.random.default_rng(5)
    positions = np.array([[0, 0, 0], [1.4, 1.4, 0], [1.4, 0, 1.4], [0, 1.4, 1.4],
                          [2.8, 2.8, 2.8], [-1.3, 1.5, 1.2]]) + rng.uniform(-0.1, 0.1, (6, 3))
    symbols = ["Si", "C", "Si", "C", "Si", "Si"]
    free = model.evaluate(positions, symbols, None, force_uncertainty=True)
    boxed = model.evaluate(positions + 10.0, symbols, np.eye(3) * 30.0, force_uncertainty=True)
    for what in ("energy", "forces", "energies", "virial", "force_uncertainties"):
        error = relative(free[what], boxed[what])
        expect(error <= 1e-12, f"cluster: {what} differ from the boxed cluster by {error:.3g}")
    expect(free["force_uncertainties"].shape == (6,) and (free["force_uncertainties"] > 0).all(),
           "cluster: force uncertainties missing or zero")
    print(f"cluster: free = boxed; force uncertainties {np.round(free['force_uncertainties'], 4)}")


def test(ctx):
    check_case(ctx, "orthogonal-one-element-float64", dtype="float64", elements=("Si",),
               tilt=(0, 0, 0), cells=(2, 2, 2))
    _, spec64, _, _ = check_case(ctx, "triclinic-two-elements-float64", dtype="float64",
                                 elements=("Si", "C"), tilt=(0.3, -0.2, 0.25), cells=(2, 1, 1))
    check_case(ctx, "orthogonal-one-element-float32", dtype="float32", elements=("Si",),
               tilt=(0, 0, 0), cells=(2, 2, 2))
    data, spec32, _, python32 = check_case(ctx, "triclinic-two-elements-float32", dtype="float32",
                                           elements=("Si", "C"), tilt=(0.3, -0.2, 0.25),
                                           cells=(2, 1, 1))
    check_lower_precisions(ctx, data, spec32, ("Si", "C"), python32)
    check_cluster(ctx, spec64)


if __name__ == "__main__":
    main(test)

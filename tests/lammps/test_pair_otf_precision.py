"""pair_style otf precision: bfloat16 and float16 (any accepted spelling) evaluate the model inside
the autocast region; energies, forces and virials stay close to float32 (within 5e-2 for bf16's
8-bit and 5e-3 for fp16's 11-bit mantissa), differ from it (the lower precision is really used),
and the log names the precision in use.
"""
from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import (plugin_header, read_dump, read_values, relative_norm_error,
                             write_crystal, write_spec)

# Relative tolerance against float32 (Euclidean norms over all atoms).
TOLERANCE = {"bfloat16": 5e-2, "float16": 5e-3}


def evaluate(ctx, data, spec, precision_words, label):
    dump = ctx.workdir / f"{label}.dump"
    virial = " ".join(f"$(c_virial[{k}])" for k in range(1, 7))
    result = run_lammps(ctx, "\n".join([
        plugin_header(ctx), f"read_data {data}",
        f"pair_style otf {spec} {precision_words}", "pair_coeff * * Si C",
        "compute virial all pressure NULL virial",
        "thermo_style custom step pe c_virial[1]",
        f"dump d all custom 1 {dump} id fx fy fz", "dump_modify d format float %.17g sort id",
        "run 0", f"print \"TOTALS $(pe) {virial}\""]) + "\n", name=f"in.{label}")
    atoms, _ = read_dump(dump)
    forces = [v for i in sorted(atoms) for v in atoms[i]]
    return result, read_values(result.log, "TOTALS")[-1], forces


def test(ctx):
    data, _ = write_crystal(ctx, "crystal.data", cells=(2, 2, 2), seed=9)
    spec = write_spec(ctx, "spec.json", dtype="float32")
    _, reference, reference_forces = evaluate(ctx, data, spec, "", "float32")
    for spelling, canonical in (("bf16", "bfloat16"), ("TORCH.Float16", "float16")):
        result, totals, forces = evaluate(ctx, data, spec, f"precision {spelling} chunk 100",
                                          canonical)
        expect_in(f"inference precision {canonical}, 100 centre atoms per chunk", result.log)
        energy_error = abs(totals[0] - reference[0]) / abs(reference[0])
        virial_error = relative_norm_error(totals[1:7], reference[1:7])
        force_error = relative_norm_error(forces, reference_forces)
        print(f"{canonical}: relative to float32: energy {energy_error:.3g}, forces "
              f"{force_error:.3g}, virial {virial_error:.3g}")
        for what, error in (("energy", energy_error), ("forces", force_error),
                            ("virial", virial_error)):
            expect(error <= TOLERANCE[canonical], f"{canonical}: {what} differ from float32 by "
                                                  f"{error:.3g} relative (> "
                                                  f"{TOLERANCE[canonical]})")
        expect(force_error > 1e-7, f"{canonical}: forces identical to float32; is the lower "
                                   "precision used at all?")


if __name__ == "__main__":
    main(test)

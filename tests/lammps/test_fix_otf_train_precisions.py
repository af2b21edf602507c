"""fix otf/train trains in every precision: on the LJ argon case (the reference lj/cut drives the
MD, the model learns from it), the validation force RMSE (f_t[3]) falls by at least 5x from its
first value within 100 steps in float32, bfloat16 and float16. float16 with scale_init 2^40 first
skips optimizer steps (f_t[6] > 0) with the loss scale (f_t[5]) halving at each skip, then steps
proceed and the weights stay finite. float16 also trains a two-element model from Tersoff SiC
(examples/sic-tersoff's start and its neural committee's descriptor): its forces were NaN there
once (a float16 backward through the descriptor, docs/design.md §7.7), so every optimizer step
was skipped and the fix stopped with its divergence error.
"""
import math

from lammps_harness import expect, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, finite, write_argon_spec, write_spec

# The descriptor of examples/sic-tersoff's neural committee (sic-committee-spec.json: its narrow
# cutoff puts the second neighbours at 3.08 A in the cutoff function's tail: tiny features, large
# standardisation scales), smaller networks.
SIC_HYPERPARAMETERS = {"radial_functions": 12, "angular_radial_functions": 6,
                       "max_angular_order": 3, "hidden": [16], "activation": "silu"}


def sic_float16(ctx):
    spec = write_spec(ctx, "sic.json", cutoff=3.2, dtype="float32", committee_size=2, seed=3,
                      hyperparameters=SIC_HYPERPARAMETERS)
    columns = " ".join(f"f_t[{i}]" for i in range(1, 20))
    script = (f"plugin load {ctx.plugin}\nunits metal\nboundary p p p\natom_modify map array\n"
              f"lattice diamond 4.3596\nregion box block 0 2 0 2 0 2\ncreate_box 2 box\n"
              f"create_atoms 1 box basis 5 2 basis 6 2 basis 7 2 basis 8 2\n"
              f"mass 1 28.0855\nmass 2 12.011\n"
              f"velocity all create 2000.0 2027 mom yes rot yes dist gaussian\ntimestep 0.0005\n"
              f"pair_style otf {spec}\npair_coeff * * Si C\n"
              f"fix md all nvt temp 1000.0 1000.0 0.05\n"
              f"fix t all otf/train reference tersoff coeff \"* * SiC.tersoff Si C\" "
              f"precision float16 every 5 steps_per_frame 4 batch 4 lr 3e-3 seed 7 "
              f"drive auto accuracy 0.2 0.005\n"
              f"thermo_style custom step pe {columns}\nthermo_modify format float %.10g\n"
              f"thermo 5\nrun 40\n")
    result = run_lammps(ctx, script, name="in.sic-float16", check=False)
    output = result.stdout + result.stderr + result.log
    expect(result.returncode == 0 and "diverged" not in output,
           f"SiC float16: the run failed; tail:\n{output[-1500:]}")
    last = result.thermo[0][-1]
    print(f"SiC float16: {last['f_t[7]']:.0f} optimizer steps, {last['f_t[6]']:.0f} skipped, "
          f"loss scale {last['f_t[5]']:.6g}, validation force RMSE {last['f_t[3]']:.4g} eV/A")
    # The skips are the GradScaler backing off from 65536 (a few halvings), not every step.
    expect(last["f_t[7]"] > 2 * last["f_t[6]"],
           f"SiC float16: {last['f_t[6]']:.0f} skipped against {last['f_t[7]']:.0f} steps")
    expect(last["f_t[5]"] >= 1.0, f"SiC float16: loss scale fell to {last['f_t[5]']}")
    expect(finite(last.values()) and last["f_t[3]"] > 0, f"SiC float16: {last}")


def test(ctx):
    spec = write_argon_spec(ctx)
    for precision in ("float32", "bfloat16", "float16"):
        fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 4 batch 4 lr 3e-3 "
               f"precision {precision} drive reference")
        result = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=100),
                            name=f"in.{precision}")
        rows = result.thermo[0]
        rmse = [row["f_t[3]"] for row in rows if row["f_t[3]"] > 0]
        expect(len(rmse) >= 5, f"{precision}: too few validation values: {rmse}")
        ratio = rmse[0] / rmse[-1]
        print(f"{precision}: validation force RMSE {rmse[0]:.4g} -> {rmse[-1]:.4g} eV/A "
              f"(x{ratio:.2f} lower), optimizer steps {rows[-1]['f_t[7]']:.0f}, "
              f"skipped {rows[-1]['f_t[6]']:.0f}, scale {rows[-1]['f_t[5]']:.6g}")
        expect(ratio >= 5.0, f"{precision}: force RMSE fell only x{ratio:.2f}: {rmse}")
        expect(all(finite(row.values()) for row in rows), f"{precision}: non-finite thermo")

    # float16 from scale 2^40: every overflowing step is skipped and halves the scale.
    fix = (f"{ARGON_LJ_REFERENCE} every 1 steps_per_frame 4 batch 2 lr 1e-3 precision fp16 "
           f"scale_init {2.0 ** 40!r} drive reference stats_frames 1")
    result = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=20, thermo=1), name="in.scale")
    rows = result.thermo[0]
    previous_skipped = 0
    for row in rows:
        skipped, scale = row["f_t[6]"], row["f_t[5]"]
        if row["f_t[7]"] + skipped == 0:
            continue
        expected = 2.0 ** 40 * 0.5 ** skipped
        expect(math.isclose(scale, expected, rel_tol=1e-6),
               f"step {row['Step']:.0f}: scale {scale} after {skipped:.0f} skips, expected "
               f"{expected} (halving per skip)")
        expect(skipped >= previous_skipped, "skipped steps went down")
        previous_skipped = skipped
    last = rows[-1]
    print(f"fp16 from 2^40: {last['f_t[6]']:.0f} skipped steps, scale {last['f_t[5]']:.6g}, "
          f"{last['f_t[7]']:.0f} optimizer steps, last loss {last['f_t[1]']:.4g}")
    expect(last["f_t[6]"] > 0, "no skipped step from scale 2^40")
    expect(last["f_t[7]"] > 0, "no optimizer step ran after the skips")
    expect(finite(last.values()), f"non-finite values (weights or loss): {last}")

    sic_float16(ctx)


if __name__ == "__main__":
    main(test)

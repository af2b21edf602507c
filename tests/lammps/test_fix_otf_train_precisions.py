"""fix otf/train trains in every precision: on the LJ argon case (the reference lj/cut drives the
MD, the model learns from it), the validation force RMSE (f_t[3]) falls by at least 5x from its
first value within 100 steps in float32, bfloat16 and float16. float16 with scale_init 2^40 first
skips optimizer steps (f_t[6] > 0) with the loss scale (f_t[5]) halving at each skip, then steps
proceed and the weights stay finite.
"""
import math

from lammps_harness import expect, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, finite, write_argon_spec


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


if __name__ == "__main__":
    main(test)

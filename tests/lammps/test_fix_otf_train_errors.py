"""fix otf/train accepts every spelling of the three precisions and rejects anything else (fp64,
float64, fp8) with a LAMMPS error listing the accepted values; an unknown keyword, a missing
pair_style otf, a bad drive value, a bad outlier_factor, bad learning-rate schedules,
accumulation and EMA values are clean errors too, never crashes; drive auto without accuracy or
thresholds (and no drive at all) runs with the default accuracy.
"""
from lammps_harness import expect, main
from pair_otf_common import ARGON_LJ_REFERENCE, expect_fix_error as expect_error, run_fix, write_argon_spec


def test(ctx):
    spec = write_argon_spec(ctx)
    canonical = {"float32": "float32", "fp32": "float32", "FP32": "float32",
                 "torch.float32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
                 "torch.bfloat16": "bfloat16", "float16": "float16", "fp16": "float16",
                 "TORCH.Float16": "float16"}
    for spelling, name in canonical.items():
        result = run_fix(ctx, f"ok-{spelling}", f"{ARGON_LJ_REFERENCE} precision {spelling}",
                         spec=spec)
        expect(result.returncode == 0, f"precision {spelling} rejected:\n{result.log[-1500:]}")
        expect(f"precision {name}," in result.log, f"precision {spelling} is not {name}")
        print(f"precision {spelling}: accepted as {name}")
    for bad in ("fp64", "float64", "fp8"):
        expect_error(ctx, f"bad-{bad}", f"{ARGON_LJ_REFERENCE} precision {bad}",
                     f"unknown precision '{bad}'", "float32, bfloat16, float16", spec=spec)
    expect_error(ctx, "unknown-keyword", f"{ARGON_LJ_REFERENCE} speed 3",
                 "unknown keyword 'speed'", "expected one of: precision, every", spec=spec)
    expect_error(ctx, "drive-unknown", f"{ARGON_LJ_REFERENCE} drive both",
                 "unknown drive 'both'", "reference, model or auto", spec=spec)
    # drive auto, and no drive at all, take the default accuracy (metal units here).
    for label, keywords in (("auto-default", "drive auto"), ("no-drive", "")):
        result = run_fix(ctx, label, f"{ARGON_LJ_REFERENCE} {keywords}", spec=spec)
        expect(result.returncode == 0 and "drive auto accuracy 0.05 0.002 (the default accuracy in "
               "units metal)" in result.log, f"{label}: no default accuracy:\n{result.log[-1500:]}")
    print("drive auto and no drive: drive auto accuracy 0.05 0.002, the default in metal units")
    # Every word of a fixed set is read in any letter case (one rule, issue 33).
    result = run_fix(ctx, "any-case", f"{ARGON_LJ_REFERENCE} drive Auto optimizer ADAM precision "
                     "FP16 lr_schedule Step 10 0.5 max_calls 100 Skip journal NONE", spec=spec)
    expect(result.returncode == 0 and "precision float16, drive auto accuracy 0.05 0.002" in
           result.log, f"any-case: not accepted as drive auto, float16:\n{result.log[-1500:]}")
    print("drive Auto, optimizer ADAM, precision FP16, lr_schedule Step, max_calls ... Skip, "
          "journal NONE: accepted")
    expect_error(ctx, "outlier-factor", f"{ARGON_LJ_REFERENCE} outlier_factor 1.5",
                 "outlier_factor must be 0 (off) or at least 2", spec=spec)
    expect_error(ctx, "thresholds-without-auto",
                 f"{ARGON_LJ_REFERENCE} drive model thresholds 0.1 0.2 0.5",
                 "apply to drive auto only", spec=spec)
    expect_error(ctx, "thresholds-order", f"{ARGON_LJ_REFERENCE} drive auto thresholds 0.1 0.5 0.2",
                 "uncertainty <= take_over", spec=spec)
    expect_error(ctx, "lr-schedule-kind", f"{ARGON_LJ_REFERENCE} lr_schedule linear 100",
                 "linear", "none, step, exponential, cosine, plateau", spec=spec)
    expect_error(ctx, "lr-schedule-values", f"{ARGON_LJ_REFERENCE} lr_schedule step 100",
                 "step needs <steps> <gamma>", spec=spec)
    expect_error(ctx, "lr-schedule-steps", f"{ARGON_LJ_REFERENCE} lr_schedule cosine 2.5",
                 "whole number", spec=spec)
    expect_error(ctx, "accumulate", f"{ARGON_LJ_REFERENCE} accumulate 0", "accumulate must be",
                 spec=spec)
    # The EMA hook states its rule once (issue 33); the message names the keyword and value.
    expect_error(ctx, "ema", f"{ARGON_LJ_REFERENCE} ema 1", "ema 1: EmaHook: decay must be in [0, 1)",
                 spec=spec)
    expect_error(ctx, "otf-reference", f'reference "hybrid/overlay lj/cut 8.5 otf {spec}" '
                 f'coeff "* * lj/cut 0.0104 3.405"', "may not use pair style 'otf'", spec=spec)
    expect_error(ctx, "no-coeff", 'reference "lj/cut 8.5" every 2', "coeff", spec=spec)
    expect_error(ctx, "bad-number", f"{ARGON_LJ_REFERENCE} every many", "Expected integer",
                 spec=spec)
    expect_error(ctx, "no-pair-otf", ARGON_LJ_REFERENCE, "needs pair_style otf", spec=spec,
                 pair="pair_style lj/cut 8.5\npair_coeff * * 0.0104 3.405\n")


if __name__ == "__main__":
    main(test)

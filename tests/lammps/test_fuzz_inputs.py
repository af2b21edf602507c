"""Fuzzing the plugin's input surface from a table: bad or unusual values for every keyword of
pair_style otf, compute otf/atom and fix otf/train, damaged model files and damaged restart
files. Every case must stop with an ERROR line that names the problem, never crash (signal,
"terminate called"), never hang (each run has a time limit) and never print a non-finite thermo
value. Cases run two at a time.
"""
import math
from concurrent.futures import ThreadPoolExecutor

from lammps_harness import expect, fail, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec

# (label, fix otf/train arguments, fragment the ERROR line must contain). The replay buffer, the
# GradScaler and the EMA hook state their own rules once (issue 33); their messages follow the
# keywords and values they came from ("buffer 0, validation 0.1: replay buffer: ...").
FIX_CASES = [
    ("every-0", "every 0", "every must be an integer in [1, "),
    ("every-wraps", "every 99999999999", "every must be an integer in [1, "),
    ("every-huge", "every 123456789012345678901", "every must be an integer"),
    ("every-fraction", "every 1.5", "Expected integer"),
    ("steps-negative", "steps_per_frame -1", "steps_per_frame must be an integer in [0, "),
    ("batch-0", "batch 0", "batch must be an integer in [1, "),
    ("lr-negative", "lr -1", "lr must be a finite number in [0, "),
    ("lr-infinite", "lr 1e999", "lr must be a finite number"),
    ("weights-negative", "weights -1 1 0", "weights E must be a finite number"),
    ("weights-zero", "weights 0 0 0", "weights E F S must be >= 0 and not all 0"),
    ("weights-infinite", "weights 1 1e400 0", "weights F must be a finite number"),
    ("buffer-0", "buffer 0", "capacity_frames must be >= 1"),
    ("validation-large", "validation 0.9", "validation_fraction must be in [0, 0.5]"),
    ("seed-negative", "seed -5", "seed must be an integer in [0, "),
    ("seed-wraps", "seed 4294967297", "seed must be an integer in [0, "),
    ("clip-negative", "clip -1", "clip must be a finite number in [0, "),
    ("clip-infinite", "clip 1e999", "clip must be a finite number"),
    ("scale-init-0", "scale_init 0", "scale_init 0, scale_growth 2, scale_backoff 0.5, scale_interval 2000: GradScaler: init_scale must be finite and > 0"),
    ("scale-growth-1", "scale_growth 1", "The growth factor must be > 1.0."),
    ("scale-backoff", "scale_backoff 1.5", "The backoff factor must be < 1.0."),
    ("scale-interval-0", "scale_interval 0", "growth_interval must be >= 1"),
    ("save-empty", 'save ""', "save needs a non-empty value"),
    ("save-every-negative", "save_every -1", "save_every must be an integer in [0, "),
    ("save-every-no-file", "save_every 10", "save_every needs a file"),
    ("stats-negative", "stats_frames -1", "stats_frames must be an integer in [0, "),
    ("drive-unknown", "drive both", "unknown drive 'both'"),
    ("thresholds-zero", "drive auto thresholds 0 1 2", "thresholds <force_rmse> must be"),
    ("thresholds-order", "drive auto thresholds 0.1 0.5 0.2", "uncertainty <= take_over"),
    ("thresholds-no-auto", "drive model thresholds 0.1 0.2 0.3", "apply to drive auto only"),
    ("accuracy-energy-0", "accuracy 0.05 0", "accuracy <energy> must be a finite number in (0, "),
    ("accuracy-infinite", "accuracy 1e999 0.002", "accuracy <force> must be a finite number"),
    ("label-steps-negative", "label_steps -2", "label_steps must be an integer in [0, "),
    ("outlier-negative", "outlier_factor -3", "outlier_factor must be a finite number in [0, "),
    ("outlier-small", "outlier_factor 1", "outlier_factor must be 0 (off) or at least 2"),
    ("outlier-infinite", "outlier_factor 1e999", "outlier_factor must be a finite number"),
    ("check-every-0", "drive auto thresholds 0.1 0.2 0.3 check_every 0",
     "check_every must be an integer in [1, "),
    ("lr-schedule-kind", "lr_schedule linear 100", "none, step, exponential, cosine, plateau"),
    ("lr-schedule-values", "lr_schedule step 100", "step needs <steps> <gamma>"),
    ("lr-schedule-infinite", "lr_schedule exponential 1e999", "lr_schedule must be a finite"),
    ("accumulate-0", "accumulate 0", "accumulate must be an integer in [1, "),
    ("ema-1", "ema 1", "ema 1: EmaHook: decay must be in [0, 1)"),
    ("max-skips-negative", "max_skips -1", "max_skips must be an integer in [0, "),
    ("reference-delay-negative", "reference_delay -1",
     "reference_delay must be a finite number in [0, 3600]"),
    ("reference-delay-day", "reference_delay 86400",
     "reference_delay must be a finite number in [0, 3600]"),
    ("optimizer-unknown", "optimizer lbfgs", "lbfgs"),
    ("precision-unknown", "precision fp64", "unknown precision 'fp64'"),
    ("precision-empty", 'precision ""', "unknown precision"),
    ("keyword-unknown", "speed 3", "unknown keyword 'speed'"),
    ("keyword-no-value", "lr", "needs 1 value(s)"),
]

# Whole fix lines (after "fix t all otf/train") that are wrong in their reference part.
FIX_LINES = [
    ("reference-empty", 'reference "" coeff "* * 0.0104 3.405"', "needs a pair style"),
    ("reference-unknown", 'reference "nosuch/style 3" coeff "* *"', "nosuch/style"),
    ("reference-model", 'reference "otf x.json" coeff "* * Ar"', "may not use pair style 'otf'"),
    ("reference-no-coeff", 'reference "lj/cut 8.5" every 2', "coeff"),
    ("reference-missing-file", 'reference "sw" coeff "* * Missing.sw Ar"', "Missing.sw"),
]

# (label, pair_style otf arguments after the model, fragment)
PAIR_CASES = [
    ("pair-precision", "precision float64", "unknown precision 'float64'"),
    ("pair-chunk-0", "chunk 0", "chunk must be at least 1"),
    ("pair-chunk-huge", "chunk 99999999999999999999", "chunk must be an integer"),
    ("pair-keyword", "speed 3", "unknown keyword 'speed'"),
    ("pair-no-value", "precision", "needs a value"),
    ("pair-resident", "resident yes", "'resident' is for the Kokkos variant"),
]


def check(ctx, label, script, fragment):
    result = run_lammps(ctx, script, name=f"in.{label}", check=False, timeout=120)
    output = result.stdout + result.stderr + result.log
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    problems = []
    if result.returncode == 0 or not errors:
        problems.append(f"no error (exit {result.returncode})")
    elif not any(fragment in line for line in errors):
        problems.append(f"no ERROR line contains {fragment!r}: {errors}")
    for bad in ("Segmentation fault", "terminate called", "core dumped", "Signal:"):
        if bad in output:
            problems.append(f"crashed ({bad})")
    for block in result.thermo:
        for row in block:
            if any(not math.isfinite(v) for v in row.values()):
                problems.append(f"non-finite thermo value: {row}")
                break
    return label, errors[0] if errors else "", problems


def restart_cases(ctx, spec):
    """A restart file written by a short training run, then damaged in the fix's own data."""
    restart = ctx.workdir / "good.restart"
    fix = f"{ARGON_LJ_REFERENCE} every 2 drive reference"
    run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=4,
                                 extra="") + f"write_restart {restart}\n", name="in.write-restart")
    data = restart.read_bytes()
    start = data.find(b"OTFTRAIN")
    expect(start > 0, "the restart file has no fix otf/train data")
    cases = []
    damaged_format = bytearray(data)
    damaged_format[start + 8:start + 12] = (2).to_bytes(4, "little")
    damaged_archive = bytearray(data)
    for offset in range(start + 40, min(len(data), start + 400), 3):
        damaged_archive[offset] ^= 0x5A
    for label, content, fragment in (("restart-old-format", damaged_format, "has format 2"),
                                     ("restart-damaged", damaged_archive, "damaged")):
        path = ctx.workdir / f"{label}.restart"
        path.write_bytes(bytes(content))
        script = (f"plugin load {ctx.plugin}\nread_restart {path}\npair_style otf {spec}\n"
                  f"pair_coeff * * Ar\nfix nve all nve\nfix t all otf/train {fix}\nrun 2\n")
        cases.append((label, script, fragment))
    return cases


def test(ctx):
    spec = write_argon_spec(ctx)
    base = argon_script(ctx, spec, fix=ARGON_LJ_REFERENCE, steps=2)
    model_line = f"pair_style otf {spec}\n"
    cases = []
    for label, extra, fragment in FIX_CASES:
        cases.append((label, base.replace(ARGON_LJ_REFERENCE, f"{ARGON_LJ_REFERENCE} {extra}"),
                      fragment))
    for label, line, fragment in FIX_LINES:
        cases.append((label, base.replace(ARGON_LJ_REFERENCE, line), fragment))
    for label, extra, fragment in PAIR_CASES:
        cases.append((label, base.replace(model_line, f"pair_style otf {spec} {extra}\n"),
                      fragment))
    cases.append(("fix-twice", base.replace("thermo_style", f"fix t2 all otf/train "
                                            f"{ARGON_LJ_REFERENCE}\nthermo_style", 1),
                  "already trains the model"))
    cases.append(("fix-group", base.replace("fix t all otf/train", "group some id 1 2 3\n"
                                            "fix t some otf/train"), "the group must be 'all'"))
    cases.append(("compute-arguments", base + "compute u all otf/atom 3\n",
                  "Illegal compute otf/atom"))
    plain = argon_script(ctx, spec, steps=2)
    cases.append(("compute-no-pair", plain.replace(model_line, "pair_style lj/cut 8.5\n")
                  .replace("pair_coeff * * Ar", "pair_coeff * * 0.0104 3.405")
                  .replace("thermo_style", "compute u all otf/atom\nthermo_style", 1),
                  "needs pair_style otf"))
    cases.append(("pair-element", base.replace("pair_coeff * * Ar", "pair_coeff * * Xx"),
                  "element 'Xx'"))
    cases.append(("pair-coeff-count", base.replace("pair_coeff * * Ar", "pair_coeff * * Ar Ar"),
                  "one element (or NULL) per atom type"))
    cases.append(("pair-units", base.replace("units metal", "units real"), "units"))
    cases.append(("pair-no-model", base.replace(model_line, "pair_style otf\n"),
                  "Illegal pair_style otf command"))
    # Damaged model files.
    good = ctx.workdir / "good.otf"
    run_lammps(ctx, argon_script(ctx, spec, fix=f"{ARGON_LJ_REFERENCE} every 2 save {good}",
                                 steps=2), name="in.write-model")
    raw = good.read_bytes()
    for label, content in (("model-truncated", raw[: len(raw) // 2]), ("model-empty", b""),
                           ("model-garbage", bytes(range(256)) * 20),
                           ("model-flipped", bytes(b ^ 0x21 if 100 < i < 900 else b
                                                   for i, b in enumerate(raw)))):
        path = ctx.workdir / f"{label}.otf"
        path.write_bytes(content)
        cases.append((label, base.replace(model_line, f"pair_style otf {path}\n"),
                      "cannot load the model"))
    cases.append(("model-missing", base.replace(model_line, "pair_style otf nowhere.otf\n"),
                  "cannot load the model"))
    cases += restart_cases(ctx, spec)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda case: check(ctx, *case), cases))
    failures = [(label, problems) for label, _, problems in results if problems]
    for label, first_error, problems in results:
        print(f"{'FAIL' if problems else 'ok  '} {label}: {first_error[:150]}")
    print(f"{len(results) - len(failures)} of {len(results)} cases stopped with a named error")
    if failures:
        fail("\n".join(f"{label}: {'; '.join(problems)}" for label, problems in failures))


if __name__ == "__main__":
    main(test)

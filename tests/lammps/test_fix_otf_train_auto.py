"""fix otf/train drive auto: the reference drives (and is called on every step) until the
validation force RMSE and the committee's force uncertainty are below their thresholds; then the
model drives, its uncertainty is checked every check_every steps, a configuration above the
uncertainty threshold is labelled and trained on, and above the take-over threshold the reference
drives again until the model qualifies again. Checked from the thermo output: hand-over and
take-over happen and are logged, the reference is called on every step of the reference phases
and only at uncertain checks in the model phases (vector elements 9, 11, 13, 14), checks label
at most one step in check_every, and the per-atom force uncertainty (the fix's per-atom vector)
has the reported maximum (element 10).
"""
import math
import re

from lammps_harness import expect, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec

CHECK_EVERY = 3


def test(ctx):
    spec = write_argon_spec(ctx)
    fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 4 batch 4 lr 3e-3 validation 0.3 "
           f"drive auto thresholds 0.1 0.4 2.0 check_every {CHECK_EVERY}")
    script = argon_script(ctx, spec, fix=fix, steps=400)
    script = script.replace("thermo_style custom step", "compute umax all reduce max f_t\n"
                            "thermo_style custom step").replace("f_t[19]\n", "f_t[19] c_umax\n")
    result = run_lammps(ctx, script, name="in.auto")
    rows = result.thermo[-1]
    hand_overs = [int(s) for s in re.findall(r"^fix otf/train: step (\d+): the model drives",
                                             result.log, re.MULTILINE)]
    take_overs = [int(s) for s in re.findall(r"^fix otf/train: step (\d+): force uncertainty .* "
                                             r"the reference drives", result.log, re.MULTILINE)]
    print(f"hand-overs to the model at steps {hand_overs}, take-overs by the reference at "
          f"{take_overs}")
    expect(hand_overs, "the model never took over")
    expect(rows[0]["f_t[11]"] == 0, "auto must start with the reference driving")
    events = sorted(hand_overs + take_overs)

    for a, b in zip(rows, rows[1:]):
        steps = b["Step"] - a["Step"]
        calls = b["f_t[9]"] - a["f_t[9]"]
        model_steps = b["f_t[13]"] - a["f_t[13]"]
        model_calls = b["f_t[14]"] - a["f_t[14]"]
        quiet = not any(a["Step"] <= e <= b["Step"] for e in events)
        if quiet and a["f_t[11]"] == 0 and b["f_t[11]"] == 0:
            expect(calls == steps and model_steps == 0,
                   f"steps {a['Step']:.0f}-{b['Step']:.0f} (reference drives): {calls:.0f} "
                   f"reference calls for {steps:.0f} steps, {model_steps:.0f} model steps")
        if quiet and a["f_t[11]"] == 1 and b["f_t[11]"] == 1:
            expect(calls == model_calls and model_steps == steps,
                   f"steps {a['Step']:.0f}-{b['Step']:.0f} (model drives): {calls:.0f} reference "
                   f"calls, {model_calls:.0f} counted as the model phase's, {model_steps:.0f} "
                   f"model steps of {steps:.0f}")
            expect(model_calls <= math.ceil(steps / CHECK_EVERY),
                   f"steps {a['Step']:.0f}-{b['Step']:.0f}: {model_calls:.0f} labels, more than "
                   f"one per check")
    for row in rows:
        expect(abs(row["c_umax"] - row["f_t[10]"]) <= 1e-12 * max(1.0, row["f_t[10]"]),
               f"step {row['Step']:.0f}: per-atom uncertainty maximum {row['c_umax']} but the "
               f"fix reports {row['f_t[10]']}")
        expect(all(math.isfinite(v) for v in row.values()), f"step {row['Step']:.0f}: not finite")
    last = rows[-1]
    expect(last["f_t[13]"] > 0 and last["f_t[14]"] > 0,
           "the model phase never labelled an uncertain configuration")
    expect(last["f_t[14]"] < last["f_t[13]"], "the model phase labelled every step")
    print(f"after {last['Step']:.0f} steps: {last['f_t[9]']:.0f} reference calls, "
          f"{last['f_t[13]']:.0f} model-driven steps with {last['f_t[14]']:.0f} reference calls "
          f"({100 * last['f_t[14]'] / last['f_t[13]']:.1f}%), validation force RMSE "
          f"{last['f_t[3]']:.4g}, max force uncertainty {last['f_t[10]']:.4g}")


if __name__ == "__main__":
    main(test)

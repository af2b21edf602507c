"""fix otf/train drive auto accuracy (the accuracy policy with calibrated uncertainty, docs/design.md
§13), on 1 and 2 MPI ranks:

* the model takes over after at least min_labels labels were predicted by a trained model and
  the last one's actual force error was within take_over/2 x the target (from the learning log);
* while it drives, a scheduled check labels exactly when the calibrated predicted force or energy
  error is above the target, and after one that did, every step is checked and labelled only when
  the predicted force error got worse (the model watched while unsure, issue 39), and every label carries its prediction from before it was learned, its actual
  error, and the fraction of atoms above the 90% bound of the calibration before it;
* thermo elements 18 and 19 are the last predicted and actual force errors; the end of the run
  logs the calibration (Spearman rank correlation included);
* 1 and 2 ranks label, hand over and take over at the same steps while their models agree: the
  ranks sum in another order, and the MD driven by a model still learning amplifies the rounding
  (every step the reference drives is a label, each trained on), so the runs are compared up to
  the first check or label whose predicted force errors differ by more than 1%, which must come
  late in the run (after step 150 of 300), and over the whole run when there is none;
* settings that cannot work are LAMMPS errors that name them.
"""
import csv
import math
import re

from lammps_harness import expect, main, run_lammps
from pair_otf_common import (ARGON_LJ_REFERENCE, argon_script, expect_fix_error,
                             write_argon_spec)

FORCE_TARGET, ENERGY_TARGET, MIN_LABELS, TAKE_OVER, CHECK_EVERY = 0.08, 0.002, 3, 4.0, 3
AGREE_STEPS = 150   # of the 300


def learning_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def one_run(ctx, spec, np):
    fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 4 lr 3e-3 validation 0.2 "
           f"drive auto accuracy {FORCE_TARGET} {ENERGY_TARGET} min_labels {MIN_LABELS} "
           f"take_over {TAKE_OVER} check_every {CHECK_EVERY} label_steps 8 "
           f"learning_log learning-np{np}.csv")
    script = argon_script(ctx, spec, fix=fix, steps=300, thermo=10)
    result = run_lammps(ctx, script, np=np, name=f"in.accuracy-np{np}")
    rows = learning_rows(ctx.workdir / f"learning-np{np}.csv")
    hand_overs = [int(s) for s in re.findall(r"^fix otf/train: step (\d+): the model drives",
                                             result.log, re.MULTILINE)]
    take_overs = [int(s) for s in re.findall(r"^fix otf/train: step (\d+): .* the reference "
                                             r"drives until", result.log, re.MULTILINE)]
    labels = [int(r["step"]) for r in rows if r["event"] == "label"]
    print(f"np {np}: {len(labels)} labels, hand-overs at {hand_overs}, take-overs at "
          f"{take_overs}, {result.thermo[-1][-1]['f_t[9]']:.0f} reference calls")

    expect(hand_overs, f"np {np}: the model never took over")
    first = hand_overs[0]
    calibrated = [r for r in rows if r["event"] == "label" and int(r["step"]) <= first
                  and float(r["atoms_above_bound"]) >= 0]
    # The first calibrated label has no calibration before it (atoms_above_bound -1), so at
    # least MIN_LABELS - 1 labels before the hand-over have a bound to be tested against.
    expect(len(calibrated) >= MIN_LABELS - 1,
           f"np {np}: the model took over at step {first} after {len(calibrated)} labels "
           f"with a calibration")
    handing = [r for r in rows if r["event"] == "label" and int(r["step"]) == first][0]
    expect(0 <= float(handing["label_force_error"]) <= TAKE_OVER / 2 * FORCE_TARGET,
           f"np {np}: handed over with a label force error of {handing['label_force_error']}")

    by_step = {}
    for r in rows:
        by_step.setdefault(int(r["step"]), []).append(r)
    checks = rechecks = 0
    floor = 0.0  # the predicted force error of the last check that asked for a label
    for step, events in sorted(by_step.items()):
        kinds = [r["event"] for r in events]
        if "check" not in kinds:
            continue
        checks += 1
        check = events[kinds.index("check")]
        predicted_f = float(check["predicted_force_error"])
        predicted_e = float(check["predicted_energy_error"])
        above = predicted_f > FORCE_TARGET or predicted_e > ENERGY_TARGET
        expect(check["drive"] == "model" or predicted_f > TAKE_OVER * FORCE_TARGET,
               f"np {np}: step {step}: a check while the reference drove")
        # Scheduled checks label above the accuracy; the checks of the steps after a check that
        # asked for a label (the model watched while unsure) label only when it got worse.
        scheduled = step % CHECK_EVERY == 0
        rechecks += not scheduled
        due = above and (scheduled or predicted_f > 1.25 * floor or
                         predicted_f > TAKE_OVER * FORCE_TARGET)
        expect(due == ("label" in kinds),
               f"np {np}: step {step}: predicted {predicted_f:.4g} eV/A, {predicted_e:.4g} "
               f"eV/atom (watch floor {floor:.4g}), but labelled: {'label' in kinds}")
        if "label" in kinds:
            floor = predicted_f
    expect(checks > 0, f"np {np}: no uncertainty checks")
    expect(rechecks > 0, f"np {np}: no step was checked after a check that asked for a label")
    for r in rows:
        if r["event"] != "label":
            continue
        for column in ("predicted_force_error", "label_force_error", "calibration_scale"):
            expect(math.isfinite(float(r[column])), f"np {np}: step {r['step']}: {column}")
        above_bound = float(r["atoms_above_bound"])
        expect(above_bound == -1 or 0 <= above_bound <= 1,
               f"np {np}: step {r['step']}: atoms_above_bound {above_bound}")
    last_label = [r for r in rows if r["event"] == "label"][-1]
    last = result.thermo[-1][-1]
    expect(abs(last["f_t[19]"] - float(last_label["label_force_error"])) <=
           1e-8 * max(1.0, last["f_t[19]"]),
           f"np {np}: f_t[19] {last['f_t[19]']} is not the last label's error "
           f"{last_label['label_force_error']}")
    expect(last["f_t[18]"] > 0, f"np {np}: no predicted force error in f_t[18]")
    summary = re.findall(r"^fix otf/train: calibration over the last (\d+) labels.*Spearman rank "
                         r"correlation of spread and error (\S+);", result.log, re.MULTILINE)
    expect(summary, f"np {np}: no calibration line at the end of the run")
    expect(int(summary[-1][0]) >= MIN_LABELS and -1 <= float(summary[-1][1]) <= 1,
           f"np {np}: calibration line {summary[-1]}")
    predictions = {(int(r["step"]), r["event"]): float(r["predicted_force_error"]) for r in rows
                   if r["event"] in ("check", "label")}
    return labels, hand_overs, take_overs, last["f_t[9]"], predictions


def expect_error(ctx, spec, label, fix, message):
    expect_fix_error(ctx, label, f"{ARGON_LJ_REFERENCE} {fix}", message, spec=spec)


def test(ctx):
    spec = write_argon_spec(ctx)
    runs = {np: one_run(ctx, spec, np) for np in (1, 2)}
    # Where the two runs' models stop agreeing to rounding (AGREE_STEPS: late enough to hold the
    # hand-overs, take-overs and watched checks this test is about).
    predictions = [runs[np][4] for np in (1, 2)]
    apart = [step for (step, event), value in predictions[0].items()
             if abs(value - predictions[1].get((step, event), value)) > 0.01 * max(abs(value), 1e-12)]
    horizon = min(apart, default=None)
    expect(horizon is None or horizon >= AGREE_STEPS,
           f"1 and 2 ranks predict force errors more than 1% apart from step {horizon} on")
    compared = [tuple([step for step in steps if horizon is None or step < horizon]
                      for steps in runs[np][:3]) for np in (1, 2)]
    if horizon is None:
        compared = [c + (runs[np][3],) for c, np in zip(compared, (1, 2))]
    expect(compared[0] == compared[1],
           f"1 and 2 ranks differ (labels, hand-overs, take-overs{', calls' if horizon is None else ''}"
           f" before step {horizon}):\n{compared[0]}\n{compared[1]}")
    print(f"1 and 2 ranks: the same label steps, hand-overs and take-overs "
          f"{'and calls over the whole run' if horizon is None else f'before step {horizon}'} "
          f"({len(compared[0][0])} labels, hand-overs at {compared[0][1]}, take-overs at "
          f"{compared[0][2]})")
    for label, keywords, message in (
            ("both-policies", "accuracy 0.05 0.002 thresholds 0.1 0.2 0.5", "not both"),
            ("accuracy-zero", "accuracy 0 0.002", "accuracy <force> must be a finite number"),
            ("accuracy-missing", "accuracy 0.05", "accuracy"),
            ("take-over-small", "accuracy 0.05 0.002 take_over 1.5",
             "take_over must be a finite number in (2"),
            ("min-labels-zero", "accuracy 0.05 0.002 min_labels 0", "min_labels"),
            ("label-steps-negative", "accuracy 0.05 0.002 label_steps -1", "label_steps")):
        expect_error(ctx, spec, label, f"drive auto {keywords}", message)
    expect_error(ctx, spec, "accuracy-without-auto", "drive model accuracy 0.05 0.002",
                 "apply to drive auto only")

if __name__ == "__main__":
    main(test)

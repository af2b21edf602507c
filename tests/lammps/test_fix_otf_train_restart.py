"""fix otf/train restarts exactly through write_restart/read_restart: a run of 2N steps matches
N steps + write_restart + (a new lmp) read_restart, pair_style otf and the fix re-issued with the
same ID + N steps, in the fix's loss, validation RMSE, optimizer steps and buffer size and in the
potential energy (the model, trained online, drives the MD). The pair style is re-issued with the
untrained spec: the weights, descriptor statistics and energy shifts come from the restart file.
The configurations restart in every phase (issue 35): during the statistics phase (nothing trained
yet) while the reference drives, while the model drives, with gradient accumulation part-way,
after labels trained on for label_steps, and in all three precisions; and a model fitted in closed
form (bayesian-linear, issue 39) restarts with its fits, draws, statistics (which keep gathering)
and calibration.
"""
import json

from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec

N = 20
# Neighbour lists rebuilt on every step and no atom sorting: the continuous run then orders atoms
# and neighbours at step N as the restarted one does (else float32 sums differ in the last bits and
# the MD, driven by a model still learning, amplifies that).
NEIGHBORS = "atom_modify sort 0 0.0\nneigh_modify every 1 delay 0 check no\n"
COLUMNS = ["PotEng", "f_t[1]", "f_t[2]", "f_t[3]", "f_t[7]", "f_t[8]", "f_t[9]", "f_t[10]",
           "f_t[11]", "f_t[13]", "f_t[14]", "f_t[15]"]


# Each configuration: its keywords, and whether optimizer steps precede the restart. "auto"
# restarts drive auto's state (who drives, its counters) and the states of a learning-rate
# schedule, gradient accumulation and EMA; with these thresholds the model takes over before the
# restart and uncertain checks are labelled after it. "statistics" restarts in the statistics
# phase with the default policy (the reference drives; training starts after the restart: the
# restart file holds no optimizer yet). "reference-fp16" restarts with a GradScaler and an
# accumulation group part-way (3 batches per step, 2 per label); "accuracy-bf16" after labels
# trained on in rounds (label_steps) under bfloat16 autocast.
FIXES = {
    "model": ("stats_frames 2 drive model", True),
    "auto": ("stats_frames 2 drive auto thresholds 1.5 3.6 6.0 check_every 3 lr_schedule step 5 "
             "0.9 accumulate 2 ema 0.9", True),
    # The reference labels every step it drives: 21 labels by the restart at step 20, the 26th
    # at step 25 ends the statistics phase.
    "statistics": ("stats_frames 26", False),
    "reference-fp16": ("stats_frames 2 drive reference precision fp16 scale_init 256 accumulate 3", True),
    "accuracy-bf16": ("stats_frames 2 precision bf16 accuracy 0.05 0.002 min_labels 2 "
                      "label_steps 8 accumulate 3", True),
}


def test(ctx):
    spec = write_argon_spec(ctx)
    for label, (keywords, trained_before) in FIXES.items():
        fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 2 lr 3e-3 validation 0.3 "
               f"buffer 6 {keywords}")
        check_restart(ctx, spec, label, fix, trained_before)
    # A closed-form model: an accuracy it cannot reach labels at every check, so it is refitted
    # before and after the restart.
    bayesian = ctx.workdir / "argon-bayesian.json"
    bayesian.write_text(json.dumps({
        "architecture": "bayesian-linear", "elements": ["Ar"], "cutoff": 5.0, "units": "metal",
        "committee_size": 4, "dtype": "float32", "seed": 3,
        "hyperparameters": {"radial_functions": 6, "angular_radial_functions": 3,
                            "max_angular_order": 2}}))
    check_restart(ctx, bayesian, "bayesian",
                  f"{ARGON_LJ_REFERENCE} buffer 6 accuracy 1e-6 1e-8 check_every 3", True)


def check_restart(ctx, spec, label, fix, trained_before, tolerance=None):
    whole = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=2 * N, thermo=2,
                                             extra=NEIGHBORS),
                       name=f"in.whole-{label}")
    first = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=N, thermo=2,
                                         extra=NEIGHBORS) +
                       f"write_restart half-{label}.restart\n", name=f"in.first-{label}")
    columns = "step temp pe " + " ".join(f"f_t[{i}]" for i in range(1, 16))
    second = run_lammps(ctx, (f"plugin load {ctx.plugin}\natom_modify map array\n"
                              f"read_restart half-{label}.restart\n{NEIGHBORS}pair_style otf {spec}\n"
                              f"pair_coeff * * Ar\nfix nve all nve\nfix t all otf/train {fix}\n"
                              f"thermo_style custom {columns}\n"
                              f"thermo_modify format float %.10g\nthermo 2\nrun {N}\n"),
                        name=f"in.second-{label}")
    expect_in("Resetting global fix info from restart file", second.log)
    expect_in("fix otf/train: training state restored from the restart file", second.log)

    reference = {int(row["Step"]): row for row in whole.thermo[-1] if int(row["Step"]) >= N}
    restarted = {int(row["Step"]): row for row in second.thermo[-1]}
    expect(sorted(reference) == sorted(restarted),
           f"steps differ: {sorted(reference)} vs {sorted(restarted)}")
    if trained_before:
        expect(first.last("f_t[7]") > 0, "no optimizer step before the restart")
    else:
        expect(first.last("f_t[7]") == 0, f"{label}: training started before the restart")
    expect(reference[2 * N]["f_t[7]"] > first.last("f_t[7]"), "no optimizer step after it")
    worst = 0.0
    for step in sorted(reference):
        for column in COLUMNS:
            a, b = reference[step][column], restarted[step][column]
            difference = abs(a - b) / max(abs(a), 1e-30) if a != b else 0.0
            worst = max(worst, difference)
            limit = (tolerance or {}).get(column, 1e-6)
            expect(difference <= limit, f"step {step}, {column}: {b!r} after the restart, "
                                        f"{a!r} without (relative {difference:.3g})")
    if label == "auto":
        expect(any(row["f_t[11]"] == 1 for row in first.thermo[-1]), "auto: the model never drove")
        expect(reference[2 * N]["f_t[14]"] > first.last("f_t[14]"),
               "auto: no uncertain configuration labelled after the restart")
    print(f"{label}: restart at step {N}: steps {N}..{2 * N}, pe / loss / validation RMSE / optimizer "
          f"steps / buffer agree to {worst:.3g} (relative, worst); optimizer steps "
          f"{int(reference[2 * N]['f_t[7]'])}, buffer {int(reference[2 * N]['f_t[8]'])}")


if __name__ == "__main__":
    main(test)

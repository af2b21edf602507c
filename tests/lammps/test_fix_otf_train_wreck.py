"""The energy guard of fix otf/train (issue 39): a model that drove the MD into a structure no
temperature reaches is not allowed to learn it, and the reference drives again.

64-atom Si from Stillinger-Weber with the closed-form learner (bayesian-linear) under the default
drive auto accuracy. After 100 steps at 1000 K `change_box` squeezes the cell to 0.8 of its edge
(SW's energy per atom rises by eVs: the stand-in for a model that drove the cell into a collapse).
* The first check after it labels the squeezed cell (the posterior is unsure there); the label is
  refused with a warning that names the energy per atom and the learned range, counts as a skipped
  label (f_t[16]), and the reference drives from the next step on;
* reference-driven labels are learned (physical MD is never refused this way) and the model
  drives again;
* with outlier_energy 0 the same input learns the squeezed cell at once (no warning);
* held-out labelling of the saved model (drive model, steps_per_frame 0) stores the labels and
  fits nothing: a model fitted in closed form is not refitted to held-out data;
* a run warm-started from a journal drives with the model fitted to it from step 0 (no call to
  label the start again), and its guards count the journal's labels.
"""
import csv
import re

from lammps_harness import expect, main, run_lammps

SPEC = """{
  "architecture": "bayesian-linear", "elements": ["Si"], "cutoff": 4.0, "units": "metal",
  "committee_size": 8, "dtype": "float64", "seed": 1,
  "hyperparameters": {"radial_functions": 8, "angular_radial_functions": 4,
                      "max_angular_order": 3, "degree": 1}
}
"""


def silicon(ctx, model, fix, runs, seed=4928459):
    """64 Si atoms from a perfect lattice at 1000 K (NVT), the model `model`, fix t, then `runs`."""
    return (f"plugin load {ctx.plugin}\nunits metal\nboundary p p p\natom_modify map array\n"
            "lattice diamond 5.431\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\n"
            "create_atoms 1 box\nmass 1 28.0855\ntimestep 0.001\n"
            f"pair_style otf {model}\npair_coeff * * Si\n"
            f"velocity all create 2000.0 {seed} mom yes rot yes dist gaussian\n"
            "fix md all nvt temp 1000.0 1000.0 0.1\n"
            f'fix t all otf/train reference "sw" coeff "* * Si.sw Si" {fix}\n{runs}')


def squeezed(ctx, extra, tag):
    return silicon(ctx, "si-bayes.json", f"{extra} learning_log learning-{tag}.csv",
                   "thermo_style custom step temp pe f_t[1] f_t[3] f_t[16]\nthermo 10\nrun 100\n"
                   "change_box all x scale 0.8 y scale 0.8 z scale 0.8 remap\nrun 60\n")


def plain(ctx, fix, steps):
    return silicon(ctx, "si-bayes.json", fix, f"run {steps}\n")


def rows_of(ctx, tag):
    with open(ctx.workdir / f"learning-{tag}.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test(ctx):
    (ctx.workdir / "si-bayes.json").write_text(SPEC)
    result = run_lammps(ctx, squeezed(ctx, "", "guarded"), name="in.guarded")
    rows = rows_of(ctx, "guarded")
    refused = [r for r in rows if r["event"] == "label_skipped"]
    expect(len(refused) == 1, f"{len(refused)} refused labels, expected 1: "
           f"{[(r['step'], r['event'], r['drive']) for r in rows]}")
    step = int(refused[0]["step"])
    expect(100 < step <= 110, f"the squeezed cell was refused at step {step}, expected the first "
           "check after step 100")
    expect(refused[0]["drive"] == "reference",
           "the reference does not drive after the refused label")
    output = result.log + result.stderr + result.stdout
    warning = re.search(rf"step {step}: label not learned, its energy per atom (\S+) is more than "
                        rf"1 beyond the range of the \d+ labels learned so far \((\S+) to (\S+);",
                        output)
    expect(warning is not None, f"no energy-guard warning for step {step}:\n{output[-3000:]}")
    per_atom, highest = float(warning.group(1)), float(warning.group(3))
    expect(per_atom > highest + 1.0, f"energy per atom {per_atom} vs learned up to {highest}")
    expect(f"step {step}: the reference drives again" in result.log,
           "the log does not say that the reference drives again")
    later = [r for r in rows if int(r["step"]) > step and r["event"] == "label"]
    expect(later and later[0]["drive"] == "reference",
           "no reference-driven label was learned after the refusal")
    expect(int(rows[-1]["skipped_labels"]) == 1, "the refusal is not counted once")
    hand_backs = [int(s) for s in re.findall(r"^fix otf/train: step (\d+): the model drives",
                                             result.log, re.MULTILINE)]
    expect(any(s > step for s in hand_backs),
           f"the model never drove again after step {step} (hand-overs at {hand_backs})")
    last = result.thermo[-1][-1]
    expect(last["f_t[16]"] == 1, f"f_t[16] = {last['f_t[16]']}, expected 1")
    print(f"squeezed cell refused at step {step} (energy {per_atom:.4f} eV/atom, learned up to "
          f"{highest:.4f}); reference drove, model again from step "
          f"{min(s for s in hand_backs if s > step)}")

    unguarded = run_lammps(ctx, squeezed(ctx, "outlier_energy 0 save off.otf", "off"),
                           name="in.off")
    rows = rows_of(ctx, "off")
    expect(all(r["event"] != "label_skipped" for r in rows),
           "with outlier_energy 0 a label was refused")
    expect("label not learned" not in unguarded.log + unguarded.stderr,
           "with outlier_energy 0 the guard warned")

    heldout = silicon(ctx, "off.otf", "every 10 steps_per_frame 0 stats_frames 0 validation 0 "
                      "drive model learning_log held.csv", "run 30\n", seed=87287)
    run_lammps(ctx, heldout, name="in.heldout")
    with open(ctx.workdir / "held.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    expect([int(r["buffer_frames"]) for r in rows] == [1, 2, 3, 4],
           f"held-out labels not stored: {[r['buffer_frames'] for r in rows]}")
    expect(all(int(r["optimizer_steps"]) == 0 for r in rows),
           f"the closed-form model was fitted to held-out labels: "
           f"{[r['optimizer_steps'] for r in rows]}")

    run_lammps(ctx, plain(ctx, "journal first.extxyz", 60), name="in.first")
    warm = run_lammps(ctx, plain(ctx, "warm_start first.extxyz learning_log learning-warm.csv", 30),
                      name="in.warm")
    rows = rows_of(ctx, "warm")
    expect(rows[0]["step"] == "0" and rows[0]["event"] == "check" and rows[0]["drive"] == "model",
           f"the warm-started run did not drive with the model from step 0: {rows[:2]}")
    expect("step 0: the model drives" in warm.log, "no hand-over at step 0 after the warm start")
    first_calls = (ctx.workdir / "first.extxyz").read_text().count("Lattice=")
    print(f"warm start from {first_calls} journalled labels: the model drives from step 0, "
          f"{rows[-1]['reference_calls']} new calls in 30 steps")


if __name__ == "__main__":
    main(test)

"""fix otf/train across LAMMPS partitions (issue 37; doc/fix_otf_train.md, Walkers): four walkers
(-partition 4x1) run 64-atom Si MD at 600, 1000, 1400 and 1800 K, each labelled by its own
Stillinger-Weber reference, and train one model (bayesian-linear, every keyword at its default).

* after the run, every walker's model gives the same energy, bit for bit, on one configuration
  (built afresh in every partition), and the model file walker 0 wrote gives it too;
* every walker learned every walker's labels: the replay buffer of each holds as many frames as
  the walkers' journals hold labels together, and no walker saw replicas differ;
* one model file; a label journal and a learning log per walker, named by it;
* the reference-call budget stops all walkers at the same step; walkers with different rank
  counts are refused by name (-partition 2 1);
* a two-walker job restarts exactly: 2N steps match N steps + write_restart (a file per walker)
  + read_restart + N steps, walker by walker, in the energy and the training outputs;
* with label_wait no and calls of 0.3 s, the walkers' MD goes on while labels are computed, and
  every label is still learned by every walker (the replicas agree, no label is lost).
"""
import re

from lammps_harness import expect, expect_in, main, parse_thermo, run_lammps

SPEC = """{
  "architecture": "bayesian-linear", "elements": ["Si"], "cutoff": 4.0, "units": "metal",
  "committee_size": 8, "dtype": "float64", "seed": 1,
  "hyperparameters": {"radial_functions": 8, "angular_radial_functions": 4,
                      "max_angular_order": 3, "degree": 1}
}
"""

TEMPERATURES = (600, 1000, 1400, 1800)


def script(ctx, *, keywords="", steps=200, check=True, temperatures=TEMPERATURES):
    seeds = " ".join(str(4928459 + 1000 * k) for k in range(len(temperatures)))
    text = (f"plugin load {ctx.plugin}\n"
            f"variable T world {' '.join(str(t) for t in temperatures)}\n"
            f"variable seed world {seeds}\n"
            "units metal\nboundary p p p\natom_modify map array\nlattice diamond 5.431\n"
            "region box block 0 2 0 2 0 2\ncreate_box 1 box\ncreate_atoms 1 box\n"
            "mass 1 28.0855\ntimestep 0.001\n"
            "pair_style otf si-bayes.json\npair_coeff * * Si\n"
            "velocity all create $(2*v_T) ${seed} mom yes rot yes dist gaussian\n"
            "fix md all nvt temp ${T} ${T} 0.1\n"
            "fix train all otf/train reference \"sw\" coeff \"* * Si.sw Si\" save si.otf "
            f"journal labels.extxyz learning_log learning.csv {keywords}\n"
            "thermo_style custom step temp pe f_train[8] f_train[9] f_train[12]\n"
            "thermo 10\n"
            f"run {steps}\n")
    if check:
        # One configuration, the same in every partition: the lattice, displaced by one seed.
        text += ("thermo_style custom step pe\nunfix train\nunfix md\n"
                 "delete_atoms group all\ncreate_atoms 1 box\n"
                 "displace_atoms all random 0.1 0.1 0.1 12345 units box\n"
                 "run 0\nprint \"LIVE_MODEL_ENERGY $(pe:%.17g)\"\n"
                 "pair_style otf si.otf\npair_coeff * * Si\n"
                 "run 0\nprint \"FILE_MODEL_ENERGY $(pe:%.17g)\"\n")
    return text


def partition_logs(ctx, name, count):
    return [(ctx.workdir / f"{name}.log.{k}").read_text() for k in range(count)]


def last_thermo(log):
    """The last thermo row of the training run: step, buffer frames, calls, replicas differ."""
    rows = re.findall(r"^\s*(\d+)\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s*$", log, re.MULTILINE)
    expect(rows, "no thermo rows in a partition's log")
    step, frames, calls, differ = rows[-1]
    return int(step), float(frames), float(calls), float(differ)


def test(ctx):
    (ctx.workdir / "si-bayes.json").write_text(SPEC)
    walkers = len(TEMPERATURES)
    run_lammps(ctx, script(ctx), np=walkers, args=("-partition", f"{walkers}x1"), name="walkers")
    logs = partition_logs(ctx, "walkers", walkers)

    live = [re.search(r"^LIVE_MODEL_ENERGY (\S+)", log, re.MULTILINE).group(1) for log in logs]
    from_file = [re.search(r"^FILE_MODEL_ENERGY (\S+)", log, re.MULTILINE).group(1)
                 for log in logs]
    expect(len(set(live)) == 1, f"the walkers' models differ: energies {live}")
    expect(set(from_file) == set(live),
           f"the model file differs from the trained model: {from_file} against {live}")

    journalled = []
    for k in range(walkers):
        journal = ctx.workdir / f"labels.walker{k}.extxyz"
        expect(journal.exists(), f"walker {k} wrote no journal {journal.name}")
        text = journal.read_text()
        journalled.append(sum(1 for line in text.splitlines() if line == "64"))
        expect(text.count(f" walker={k} ") == journalled[-1],
               f"walker {k}'s journal does not name the walker in every frame")
        expect((ctx.workdir / f"learning.walker{k}.csv").exists(),
               f"walker {k} wrote no learning log")
    expect(not list(ctx.workdir.glob("si.walker*")), "a walker wrote its own model file")
    expect((ctx.workdir / "si.otf").exists(), "no model file")
    total = sum(journalled)
    for k, log in enumerate(logs):
        _, frames, calls, differ = last_thermo(log)
        expect(calls == journalled[k],
               f"walker {k}: {calls} reference calls but {journalled[k]} journalled labels")
        expect(frames == total,
               f"walker {k} holds {frames} frames, but the walkers made {total} labels "
               f"({journalled})")
        expect(differ == 0.0, f"walker {k} saw the replicas differ")
    # Each walker learned from its own reference at least once (the conditions differ).
    expect(min(journalled) >= 1 and total <= 40,
           f"labels per walker {journalled}: expected 1 to 10 each")
    expect_in("learned the label(s) of walker(s)", logs[0])

    # The budget: max_calls 2 stops every walker at the same step.
    run_lammps(ctx, script(ctx, keywords="max_calls 2", check=False, steps=300), np=walkers,
               args=("-partition", f"{walkers}x1"), name="budget")
    logs = partition_logs(ctx, "budget", walkers)
    steps = [last_thermo(log)[0] for log in logs]
    expect(len(set(steps)) == 1 and steps[0] < 300,
           f"the budget stopped the walkers at steps {steps}")
    for log in logs:
        expect_in("the reference-call budget (max_calls 2) is spent", log)

    # Walkers need as many ranks each.
    result = run_lammps(ctx, script(ctx, check=False, steps=10, temperatures=(600, 1000)), np=3,
                        args=("-partition", "2", "1"), name="uneven", check=False)
    expect(result.returncode != 0, "walkers of 2 and 1 ranks were accepted")
    text = result.stdout + result.stderr + "".join(
        p.read_text() for p in ctx.workdir.glob("uneven*") if p.is_file())
    text += "".join(p.read_text() for p in ctx.workdir.glob("screen*") if p.is_file())
    expect_in("walkers that train one model need as many ranks each", text, "output")

    check_restart(ctx)
    check_label_wait(ctx)


def check_label_wait(ctx):
    """label_wait no: labels learned on later steps, every walker holds them all."""
    walkers = len(TEMPERATURES)
    for old in ctx.workdir.glob("labels.walker*.extxyz"):
        old.unlink()
    run_lammps(ctx, script(ctx, keywords="label_wait no reference_delay 0.3", steps=200),
               np=walkers, args=("-partition", f"{walkers}x1"), name="nowait")
    logs = partition_logs(ctx, "nowait", walkers)
    live = [re.search(r"^LIVE_MODEL_ENERGY (\S+)", log, re.MULTILINE).group(1) for log in logs]
    expect(len(set(live)) == 1, f"label_wait no: the walkers' models differ: energies {live}")
    journalled = [sum(1 for line in (ctx.workdir / f"labels.walker{k}.extxyz").read_text()
                      .splitlines() if line == "64") for k in range(walkers)]
    for k, log in enumerate(logs):
        _, frames, calls, differ = last_thermo(log)
        expect(calls == journalled[k] and frames == sum(journalled) and differ == 0.0,
               f"label_wait no, walker {k}: {calls} calls, {journalled[k]} journalled, {frames} "
               f"frames held of {sum(journalled)} labels, replicas differ {differ}")
    went_on = sum(log.count("(the MD went on while the reference computed it)") for log in logs)
    expect(went_on > 0, "label_wait no: no walker's MD went on while its label was computed")
    print(f"label_wait no: {sum(journalled)} labels ({journalled}), {went_on} learned after the "
          "MD went on, every walker holds them all, replicas identical")


RESTART_STEPS = 30
# As in test_fix_otf_train_restart.py: no sorting, neighbour lists every step, so the continued
# and the restarted run order atoms and neighbours alike.
NEIGHBORS = "atom_modify sort 0 0.0\nneigh_modify every 1 delay 0 check no\n"
RESTART_COLUMNS = ("step pe f_train[1] f_train[3] f_train[7] f_train[8] f_train[9] f_train[13] "
                   "f_train[14]")


def check_restart(ctx):
    """Two walkers (600 and 1400 K): 2N steps against N + write_restart + read_restart + N."""
    temperatures = (600, 1400)
    fix = ("fix train all otf/train reference \"sw\" coeff \"* * Si.sw Si\" "
           "journal restart-labels.extxyz\n")
    output = (f"thermo_style custom {RESTART_COLUMNS}\nthermo_modify format float %.15g\n"
              "thermo 5\n")
    start = script(ctx, steps=0, check=False, temperatures=temperatures)
    start = start[:start.index("fix train")].replace("timestep", NEIGHBORS + "timestep")
    start += "variable w world 0 1\n" + fix + output
    args = ("-partition", "2x1")
    run_lammps(ctx, start + f"run {2 * RESTART_STEPS}\n", np=2, args=args, name="whole")
    run_lammps(ctx, start + f"run {RESTART_STEPS}\nwrite_restart half.${{w}}.restart\n", np=2,
               args=args, name="first")
    second = (f"plugin load {ctx.plugin}\nvariable T world {temperatures[0]} {temperatures[1]}\n"
              "variable w world 0 1\natom_modify map array\nread_restart half.${w}.restart\n"
              f"{NEIGHBORS}pair_style otf si-bayes.json\npair_coeff * * Si\n"
              "fix md all nvt temp ${T} ${T} 0.1\n" + fix + output + f"run {RESTART_STEPS}\n")
    run_lammps(ctx, second, np=2, args=args, name="second")
    labelled_after = []
    for k in range(2):
        restarted_log = (ctx.workdir / f"second.log.{k}").read_text()
        expect_in("fix otf/train: training state restored from the restart file", restarted_log)
        whole = {row["Step"]: row for row in parse_thermo(
            (ctx.workdir / f"whole.log.{k}").read_text())[-1] if row["Step"] >= RESTART_STEPS}
        restarted = {row["Step"]: row for row in parse_thermo(restarted_log)[-1]}
        expect(sorted(whole) == sorted(restarted),
               f"walker {k}: steps {sorted(restarted)} after the restart, {sorted(whole)} without")
        for step, row in whole.items():
            for column, value in row.items():
                expect(restarted[step][column] == value,
                       f"walker {k}, step {step}, {column}: {restarted[step][column]!r} after "
                       f"the restart, {value!r} without")
        last = whole[2 * RESTART_STEPS]
        labelled_after.append(last["f_train[9]"] > whole[RESTART_STEPS]["f_train[9]"])
        print(f"walker {k}: restart at step {RESTART_STEPS} continues exactly to step "
              f"{2 * RESTART_STEPS} ({int(last['f_train[9]'])} reference calls, "
              f"{int(last['f_train[8]'])} frames)")
    expect(any(labelled_after), "no walker labelled after the restart: the test shows little")


if __name__ == "__main__":
    main(test)

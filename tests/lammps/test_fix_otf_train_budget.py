"""max_calls and learning_log: the run stops after the N-th reference call and the input goes on
(a second run stops at once); with `skip` the model drives on without labels. The learning log
has a row per label and per check, and a run continued from a restart file (write_restart,
read_restart) leaves the same rows as the uninterrupted run, none twice; the plot script turns it
into a PNG.
"""
import csv
import subprocess

from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec

FIX = f"{ARGON_LJ_REFERENCE} every 2 lr 3e-3 validation 0.3 seed 3"
# As in test_fix_otf_train_restart.py: the same atom order and lists before and after a restart.
NEIGHBORS = "atom_modify sort 0 0.0\nneigh_modify every 1 delay 0 check no\n"


def rows_without_timing(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row.pop("reference_seconds")
        row.pop("training_seconds")
    return rows


def test(ctx):
    spec = write_argon_spec(ctx)
    w = ctx.workdir

    # stop: after the 5th call (steps 0..8, every 2), the next command runs, a 2nd run stops.
    script = argon_script(ctx, spec, fix=f"{FIX} drive reference max_calls 5", steps=30, thermo=1,
                          extra="")
    script += 'print "AFTER-FIRST-RUN"\nrun 10\nprint "AFTER-SECOND-RUN"\n'
    result = run_lammps(ctx, script, name="in.stop")
    expect_in("the reference-call budget (max_calls 5) is spent: the run stops here", result.log)
    expect_in("AFTER-SECOND-RUN", result.log)
    first = result.thermo[0]
    expect(first[-1]["Step"] == 4 and first[-1]["f_t[9]"] == 5,
           f"stopped at step {first[-1]['Step']} after {first[-1]['f_t[9]']} calls")
    expect(result.thermo[1][-1]["f_t[9]"] == 5, "the second run called the reference")
    print(f"np {ctx.np}: max_calls 5 stopped the run at step 4; the input went on")

    # skip: the model drives on for the whole run, no more labels.
    result = run_lammps(ctx, argon_script(ctx, spec, fix=f"{FIX} drive model max_calls 3 skip",
                                          steps=20, thermo=10), name="in.skip")
    last = result.thermo[0][-1]
    expect(last["Step"] == 20 and last["f_t[9]"] == 3, "skip: wrong steps or calls")
    expect_in("no more labels, the model drives on", result.log)

    # learning log, uninterrupted and continued from a restart file.
    auto = f"{FIX} drive auto thresholds 10 10 20 check_every 3 learning_log {{}}"
    whole = argon_script(ctx, spec, fix=auto.format("whole.csv"), steps=24, thermo=4,
                         extra=NEIGHBORS)
    run_lammps(ctx, whole, name="in.whole")
    first_part = argon_script(ctx, spec, fix=auto.format("restarted.csv"), steps=12, thermo=4,
                              extra=NEIGHBORS)
    first_part += "write_restart half.restart\nrun 6\n"   # rows of 13-18 are written again below
    run_lammps(ctx, first_part, name="in.first")
    second_part = (f"plugin load {ctx.plugin}\natom_modify map array\nread_restart half.restart\n"
                   f"{NEIGHBORS}pair_style otf {spec}\npair_coeff * * Ar\nfix nve all nve\ntimestep 0.002\n"
                   f"fix t all otf/train {auto.format('restarted.csv')}\n"
                   f"thermo_style custom step pe f_t[9]\nthermo 4\nrun 12\n")
    run_lammps(ctx, second_part, name="in.second")
    expected = rows_without_timing(w / "whole.csv")
    actual = rows_without_timing(w / "restarted.csv")
    events = [r["event"] for r in expected]
    expect("label" in events and "check" in events, f"events {events}")
    steps = [(r["step"], r["event"]) for r in actual]
    expect(len(steps) == len(set(steps)), f"duplicate rows: {steps}")
    expect([r["step"] for r in actual] == [r["step"] for r in expected],
           f"restarted steps {[r['step'] for r in actual]} != {[r['step'] for r in expected]}")
    for a, e in zip(actual, expected):
        for key in ("event", "drive", "reference_calls", "optimizer_steps", "buffer_frames"):
            expect(a[key] == e[key], f"step {e['step']}: {key} {a[key]} != {e[key]}")
        for key in ("loss", "force_rmse"):
            expect(abs(float(a[key]) - float(e[key])) <= 1e-5 * max(abs(float(e[key])), 1e-12),
                   f"step {e['step']}: {key} {a[key]} != {e[key]}")
    print(f"np {ctx.np}: learning log of {len(expected)} rows ({events.count('label')} labels, "
          f"{events.count('check')} checks) equal after a restart, none twice")

    plot = ctx.source_dir.parent.parent / "scripts" / "plot_learning_curves.py"
    done = subprocess.run(["/usr/bin/python3", str(plot), str(w / "whole.csv"),
                           str(w / "whole.png")], capture_output=True, text=True)
    # scripts/setup.sh installs python3-matplotlib; without it this check fails.
    expect(done.returncode == 0 and (w / "whole.png").stat().st_size > 10000,
           f"plot failed: {done.stderr[-800:]}")


if __name__ == "__main__":
    main(test)

"""fix otf/train walkers with a neural committee (issue 37; doc/fix_otf_train.md, Walkers), on
two partitions of one rank (-partition 2x1), LJ argon at 40 and 80 K:

* under drive auto accuracy every walker runs the label fit (label_steps) on every label of a
  round, its own and the other walker's, in walker order: the replicas stay identical (output 12
  never set, the same optimizer steps on both walkers), and the same job with label_steps 0 takes
  fewer optimizer steps (without the label fit in rounds both would be the same run);
* keywords that shape the shared model's training must agree between partitions: a different lr
  or, for a model trained by gradients, a different accuracy (the label fit's target) is a LAMMPS
  error naming the rule; a different policy setting (check_every) is accepted.
"""
import re

from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec

WALKERS = 2
ARGS = ("-partition", f"{WALKERS}x1")


def walkers_script(ctx, spec, keywords, steps=120):
    fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 4 lr ${{lr}} validation 0.2 "
           f"drive auto accuracy ${{force}} 0.002 min_labels 3 take_over 4 {keywords}")
    text = argon_script(ctx, spec, fix=fix, steps=steps, thermo=10, temperature="${T}")
    return text.replace("units metal\n", "variable T world 40 80\nunits metal\n", 1)


def variables(lr=("3e-3", "3e-3"), force=("0.08", "0.08")):
    return (f"variable lr world {lr[0]} {lr[1]}\nvariable force world {force[0]} {force[1]}\n")


def final_rows(ctx, name):
    rows = []
    for k in range(WALKERS):
        log = (ctx.workdir / f"{name}.log.{k}").read_text()
        header = re.search(r"^\s*Step .*$", log, re.MULTILINE).group(0).split()
        table = [line.split() for line in log.splitlines()
                 if len(line.split()) == len(header) and line.split()[0].isdigit()]
        expect(table, f"{name}: no thermo rows in walker {k}'s log")
        rows.append({h: float(v) for h, v in zip(header, table[-1])})
    return rows


def run_job(ctx, spec, name, keywords, **values):
    script = walkers_script(ctx, spec, keywords)
    script = script.replace("units metal\n", variables(**values) + "units metal\n", 1)
    return run_lammps(ctx, script, np=WALKERS, args=ARGS, name=name, check=False)


def test(ctx):
    spec = write_argon_spec(ctx)

    fitted = run_job(ctx, spec, "fit", "label_steps 8")
    expect(fitted.returncode == 0, f"the walkers' job failed:\n{fitted.stdout[-2000:]}")
    rows = final_rows(ctx, "fit")
    steps = [row["f_t[7]"] for row in rows]
    calls = [row["f_t[9]"] for row in rows]
    for k, row in enumerate(rows):
        expect(row["f_t[12]"] == 0.0, f"walker {k} saw the replicas differ")
        expect(row["f_t[9]"] >= 1, f"walker {k} made no reference call")
    # While the reference drives, every step is a call and every 2nd answer is learned.
    frames = [row["f_t[8]"] for row in rows]
    expect(frames[0] == frames[1] > 0, f"the walkers hold {frames} frames")
    expect(steps[0] == steps[1], f"the walkers took {steps} optimizer steps")
    expect(rows[0]["PotEng"] != rows[1]["PotEng"], "both walkers ran the same MD")

    unfitted = run_job(ctx, spec, "nofit", "label_steps 0")
    expect(unfitted.returncode == 0, f"the label_steps 0 job failed:\n{unfitted.stdout[-2000:]}")
    plain = final_rows(ctx, "nofit")
    expect(plain[0]["f_t[12]"] == 0.0 and plain[1]["f_t[12]"] == 0.0,
           "label_steps 0: the replicas differ")
    expect(steps[0] > plain[0]["f_t[7]"],
           f"label_steps 8 took {steps[0]} optimizer steps, label_steps 0 {plain[0]['f_t[7]']}: "
           "the label fit did not run in the walkers' rounds")
    print(f"label_steps 8: {steps[0]:.0f} optimizer steps, calls {calls}; label_steps 0: "
          f"{plain[0]['f_t[7]']:.0f} optimizer steps")

    rule = "training keywords must be the same in every partition"
    for name, values in (("lr", {"lr": ("3e-3", "1e-3")}), ("force", {"force": ("0.08", "0.1")})):
        result = run_job(ctx, spec, f"differ-{name}", "label_steps 8", **values)
        expect(result.returncode != 0, f"walkers with different {name} were accepted")
        logs = [(ctx.workdir / f"differ-{name}.log.{k}").read_text() for k in range(WALKERS)]
        expect(any(rule in log for log in logs),
               f"different {name}: no walker's log names the rule {rule!r}")
        expect_in(rule, result.stdout, f"the job's screen (different {name})")

    # Each walker decides for its own MD: policy keywords may differ.
    policy = walkers_script(ctx, spec, "label_steps 8 check_every ${check}", steps=20)
    policy = policy.replace("units metal\n", variables() + "variable check world 3 5\nunits metal\n",
                            1)
    run_lammps(ctx, policy, np=WALKERS, args=ARGS, name="policy")


if __name__ == "__main__":
    main(test)

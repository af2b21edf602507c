"""Labels in the background (issue 37; doc/fix_otf_train.md, Labels in the background): argon
with an i-PI reference (the test client, Lennard-Jones, 0.3 s a call) under drive auto with
`label_wait no`.

* the labels the model's driving asks for are learned on a later step than they were asked on
  (learning log: label_asked, then label; the log says the MD went on while the client computed);
* the labels the reference drove with were waited for (label on the step itself);
* nothing is lost: every call is journalled and learned (the journal, the calls and the buffer
  agree), and one in flight at the end of the run is learned before the run ends;
* a client that dies during a background call is restarted from the background thread, the
  warning is printed when the answer is collected, and the label is kept;
* the same input with `label_wait yes` makes every label on the step it was asked on.
"""
import csv

from ipi_common import CLIENT, CLIENT_PYTHON, LJ_ARGS, unique_name
from lammps_harness import expect, expect_in, main, parse_thermo, run_lammps
from pair_otf_common import write_argon_spec

STEPS = 60
DELAY = 0.3
# The reference drives first (a call on every step), then the model, checked every 3 steps; an
# uncertainty above 3.6 asks for a label, above 6 the reference drives again.
FIX = ("every 2 steps_per_frame 2 batch 2 lr 3e-3 validation 0.3 stats_frames 2 buffer 40 "
       "drive auto thresholds 1.5 3.6 6.0 check_every 3 journal labels.extxyz "
       "learning_log learning.csv timeout 30 connect_timeout 30")


def script(ctx, spec, socket, label_wait, fault="none", fault_at=1, retries=0):
    # --fault-once: the restarted client (counting its calls afresh) does not die again.
    client = (f"{CLIENT_PYTHON} {CLIENT} --unix {{host}} {LJ_ARGS} --delay {DELAY} "
              f"--fault {fault} --fault-at {fault_at} --fault-once {ctx.workdir / 'faulted'}")
    return (f"plugin load {ctx.plugin}\nunits metal\natom_style atomic\natom_modify map array\n"
            "lattice fcc 5.26\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\ncreate_atoms 1 box\n"
            "mass 1 39.948\ndisplace_atoms all random 0.1 0.1 0.1 4 units box\n"
            "velocity all create 60 7 loop geom\n"
            f"pair_style otf {spec}\npair_coeff * * Ar\nfix nve all nve\ntimestep 0.002\n"
            f"fix t all otf/train reference ipi unix {socket} client \"{client}\" "
            f"client_log client.log retries {retries} label_wait {label_wait} {FIX}\n"
            "thermo_style custom step pe f_t[8] f_t[9] f_t[14] f_t[16] f_t[17]\n"
            f"thermo 10\nrun {STEPS}\n")


def learning_rows(ctx):
    with open(ctx.workdir / "learning.csv") as f:
        return list(csv.DictReader(f))


def journal_count(ctx):
    return sum(1 for line in (ctx.workdir / "labels.extxyz").read_text().splitlines()
               if line.strip() == "32")


def clean(ctx):
    for name in ("learning.csv", "labels.extxyz", "client.log", "faulted"):
        (ctx.workdir / name).unlink(missing_ok=True)


def test(ctx):
    spec = write_argon_spec(ctx)

    # label_wait yes: every label on the step it was asked on.
    clean(ctx)
    run_lammps(ctx, script(ctx, spec, unique_name("wait"), "yes"), name="wait", timeout=300)
    rows = learning_rows(ctx)
    expect(not [r for r in rows if r["event"] == "label_asked"],
           "label_wait yes sent a label to the background")
    waited_model_labels = [r for r in rows if r["event"] == "label" and r["drive"] == "model"]

    # label_wait no.
    clean(ctx)
    result = run_lammps(ctx, script(ctx, spec, unique_name("nowait"), "no"), name="nowait",
                        timeout=300)
    rows = learning_rows(ctx)
    asked = [int(r["step"]) for r in rows if r["event"] == "label_asked"]
    expect(asked, "no label was asked for in the background "
           f"(label_wait yes made {len(waited_model_labels)} labels while the model drove)")
    # The label rows of the model phase follow their label_asked rows on later steps.
    for step in asked:
        later = [int(r["step"]) for r in rows
                 if r["event"] == "label" and int(r["step"]) > step]
        expect(later, f"the label asked for on step {step} was never learned")
    learned_later = [line for line in result.log.splitlines()
                     if "(the MD went on while the reference computed it)" in line]
    expect(learned_later, "no label was learned after the MD went on")
    final = parse_thermo(result.log)[0][-1]
    calls, journalled = final["f_t[9]"], journal_count(ctx)
    expect(calls == journalled, f"{calls} calls but {journalled} journalled labels")
    expect(final["f_t[16]"] == 0, f"{final['f_t[16]']} labels skipped")
    label_rows = sum(1 for r in rows if r["event"] == "label")
    expect(label_rows == calls, f"{label_rows} labels learned, {calls} calls made")
    expect_in("label_wait no", result.log)
    print(f"label_wait no: {int(calls)} calls, {len(asked)} in the background (asked on steps "
          f"{asked}), every one learned; label_wait yes: {len(waited_model_labels)} model-phase "
          "labels")

    # The client dies during the first background call: restarted from the background thread,
    # the warning given when the answer is collected, the label kept.
    first_background_call = sum(1 for r in rows if r["event"] in ("label", "label_asked")
                                and int(r["step"]) < asked[0]) + 1
    clean(ctx)
    result = run_lammps(ctx, script(ctx, spec, unique_name("die"), "no", fault="die",
                                    fault_at=first_background_call, retries=1),
                        name="die", timeout=300)
    expect_in("restarting the client and trying again", result.log)
    final = parse_thermo(result.log)[0][-1]
    expect(final["f_t[17]"] == 1 and final["f_t[16]"] == 0,
           f"{final['f_t[17]']} failed attempts, {final['f_t[16]']} skipped labels: expected the "
           "one death, recovered")
    expect(final["f_t[9]"] == journal_count(ctx), "a label was lost after the client died")
    print(f"the client died in call {first_background_call} (in the background): restarted, "
          "the label kept")


if __name__ == "__main__":
    main(test)

"""Walkers with an i-PI reference each (issue 37; doc/fix_otf_train.md, Walkers): four partitions
(-partition 4x1) of argon at four temperatures, each walker's fix starting its own client (the
test client, Lennard-Jones, 0.4 s a call) on its own socket (NAME-walkerK).

* the four clients compute side by side: at every labelled step the four calls overlap in time
  (their received/answered timestamps), so a step's labels cost the wall time of one call;
* a failing client affects only its walker, as the fault rules for one run say: walker 1's client
  dies in its 2nd call and is restarted (the label is not lost), walker 3's answers NaN forces once
  with no retries (that label is skipped, the model drives on); the others see no failure;
* no label is lost: every walker's buffer holds every label the four journals hold, and the
  model replicas give the same energy, bit for bit, on every walker.
"""
import re

from ipi_common import CLIENT, CLIENT_PYTHON, LJ_ARGS, unique_name
from lammps_harness import expect, expect_in, main, parse_thermo, run_lammps
from pair_otf_common import write_argon_spec

WALKERS = 4
STEPS = 10
LABELS = STEPS // 2 + 1  # every 2, step 0 included
DELAY = 0.4


def script(ctx, spec, socket):
    # LAMMPS substitutes no variables inside quotes: the walker's settings reach the client's
    # command line (run by /bin/sh) through the environment.
    client = (f"{CLIENT_PYTHON} {CLIENT} --unix {{host}} {LJ_ARGS} --delay {DELAY} "
              "--times-log times.$WALKER.log --fault $WALKER_FAULT --fault-at 2 "
              "--fault-once once.$WALKER")
    return (f"plugin load {ctx.plugin}\n"
            "variable w world 0 1 2 3\nvariable T world 30 50 70 90\n"
            "variable fault world none die none nan\nvariable retries world 1 1 1 0\n"
            "shell putenv WALKER=${w} WALKER_FAULT=${fault}\n"
            "units metal\natom_style atomic\natom_modify map array\n"
            "lattice fcc 5.26\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\ncreate_atoms 1 box\n"
            "mass 1 39.948\ndisplace_atoms all random 0.1 0.1 0.1 4 units box\n"
            "velocity all create ${T} 7 loop geom\n"
            f"pair_style otf {spec}\npair_coeff * * Ar\nfix nve all nve\ntimestep 0.002\n"
            f"fix t all otf/train reference ipi unix {socket} client \"{client}\" "
            "client_log client.${w}.log every 2 lr 3e-3 drive model validation 0.3 timeout 20 "
            "connect_timeout 20 retries ${retries} journal labels.extxyz\n"
            "thermo_style custom step pe f_t[8] f_t[9] f_t[12] f_t[16] f_t[17]\n"
            f"thermo 2\nrun {STEPS}\n"
            # One configuration, the same on every walker, under each walker's trained model.
            "unfix t\nunfix nve\ndelete_atoms group all\ncreate_atoms 1 box\n"
            "displace_atoms all random 0.1 0.1 0.1 99 units box\nthermo_style custom step pe\n"
            "run 0\nprint \"MODEL_ENERGY $(pe:%.17g)\"\n")


def test(ctx):
    spec = write_argon_spec(ctx)
    socket = unique_name("walkers")
    run_lammps(ctx, script(ctx, spec, socket), np=WALKERS, args=("-partition", f"{WALKERS}x1"),
               name="walkers", timeout=300)
    logs = [(ctx.workdir / f"walkers.log.{k}").read_text() for k in range(WALKERS)]

    for k, log in enumerate(logs):
        expect_in(f"unix:/tmp/ipi_{socket}-walker{k}", log, f"walker {k}'s log")

    # Side by side: the k-th call of every client belongs to the same labelled step.
    times = [[tuple(float(x) for x in line.split())
              for line in (ctx.workdir / f"times.{k}.log").read_text().splitlines()]
             for k in range(WALKERS)]
    for k in (0, 2):
        expect(len(times[k]) == LABELS, f"walker {k}'s client answered {len(times[k])} calls")
    overlapping = 0
    for call in range(LABELS):
        calls = [times[k][call] for k in (0, 2) if call < len(times[k])]
        if max(start for start, _ in calls) < min(end for _, end in calls):
            overlapping += 1
    expect(overlapping == LABELS,
           f"the clients of walkers 0 and 2 computed side by side in {overlapping} of {LABELS} "
           "labelled steps")
    first_calls = [times[k][0] for k in range(WALKERS)]
    expect(max(s for s, _ in first_calls) < min(e for _, e in first_calls),
           f"the four clients' first calls did not overlap: {first_calls}")

    rows = [parse_thermo(log)[0][-1] for log in logs]
    journals = [sum(1 for line in (ctx.workdir / f"labels.walker{k}.extxyz").read_text()
                    .splitlines() if line.strip() == "32") for k in range(WALKERS)]
    for k, row in enumerate(rows):
        expect(row["f_t[9]"] == journals[k],
               f"walker {k}: {row['f_t[9]']} calls, {journals[k]} journalled labels")
        expect(row["f_t[8]"] == sum(journals),
               f"walker {k} holds {row['f_t[8]']} frames, the journals {sum(journals)} labels")
        expect(row["f_t[12]"] == 0, f"walker {k} saw the replicas differ")
    # Walker 1: the client died in its 2nd call, was restarted, the label kept.
    expect(rows[1]["f_t[17]"] == 1 and rows[1]["f_t[16]"] == 0 and journals[1] == LABELS,
           f"walker 1: {rows[1]['f_t[17]']} failed attempts, {rows[1]['f_t[16]']} skipped labels, "
           f"{journals[1]} journalled")
    expect_in("restarting the client and trying again", logs[1], "walker 1's log")
    # Walker 3: NaN forces with no retries: that label skipped, the model drove on.
    expect(rows[3]["f_t[16]"] == 1 and journals[3] == LABELS - 1,
           f"walker 3: {rows[3]['f_t[16]']} skipped labels, {journals[3]} journalled")
    expect_in("label skipped, the model drives on", logs[3], "walker 3's log")
    for k in (0, 2):
        expect(rows[k]["f_t[16]"] == 0 and rows[k]["f_t[17]"] == 0 and journals[k] == LABELS,
               f"walker {k} was affected by another walker's client")

    energies = [re.search(r"^MODEL_ENERGY (\S+)", log, re.MULTILINE).group(1) for log in logs]
    expect(len(set(energies)) == 1, f"the walkers' models differ: {energies}")
    span = max(e for _, e in sum(times, [])) - min(s for s, _ in sum(times, []))
    print(f"4 clients, {sum(journals)} labels ({journals}), {LABELS} labelled steps in {span:.1f} s "
          f"of client time (one after another: >= {sum(journals) * DELAY:.1f} s); walker 1 "
          "recovered a dead client, walker 3 skipped a NaN label; replicas identical")


if __name__ == "__main__":
    main(test)

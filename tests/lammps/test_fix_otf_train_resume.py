"""Resume after a kill (issue 35): a training run with a reference, a label journal and periodic
restart files is killed with SIGKILL at random points; each time it is resumed from its last
restart file and the journal (read_restart, the same fix, `run N upto`). The journalled labels
after the restart file are replayed as the MD reaches them, so that the resumed run ends exactly
as the uninterrupted one: the same journal (every label once, in order, bit for bit), the same
reference calls, buffer, optimizer steps and loss, and no new reference call for a label the
killed run had paid for.
"""
import os
import random
import re
import signal
import subprocess
import time

from ipi_common import read_journal
from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, write_argon_spec

STEPS = 80
RESTART_EVERY = 15
KILLS = 10  # per rank count: 10 kill points on 1 rank and 10 on 2 ranks (issue 35)
# The reference drives first (a call on every step), then the model with checks and labels.
FIX = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 2 lr 3e-3 validation 0.3 "
       "stats_frames 2 buffer 6 drive auto thresholds 1.5 3.6 6.0 check_every 3 accumulate 3 "
       "journal journal.extxyz")
NEIGHBORS = "atom_modify sort 0 0.0\nneigh_modify every 1 delay 0 check no\n"
# f_t[i]: loss, optimizer_steps, buffer_frames, reference_calls, model_drives, model_driven_steps,
# model_phase_labels, skipped_labels (doc/fix_otf_train.md, output).
COLUMNS = ["f_t[1]", "f_t[7]", "f_t[8]", "f_t[9]", "f_t[11]", "f_t[13]", "f_t[14]", "f_t[16]"]
THERMO = ("thermo_style custom step pe " + " ".join(f"f_t[{i}]" for i in range(1, 20)) +
          "\nthermo_modify format float %.12g\nthermo 1\n")


def fresh_script(ctx, spec):
    return (f"plugin load {ctx.plugin}\nunits metal\natom_style atomic\natom_modify map array\n"
            f"lattice fcc 5.26\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\n"
            f"create_atoms 1 box\nmass 1 39.948\ndisplace_atoms all random 0.1 0.1 0.1 4 units box\n"
            f"velocity all create 60 7 loop geom\n{NEIGHBORS}pair_style otf {spec}\n"
            f"pair_coeff * * Ar\nfix nve all nve\ntimestep 0.002\nfix t all otf/train {FIX}\n"
            f"{THERMO}restart {RESTART_EVERY} r.*.restart\nrun {STEPS}\n")


def resume_script(ctx, spec, restart):
    return (f"plugin load {ctx.plugin}\natom_modify map array\nread_restart {restart}\n"
            f"{NEIGHBORS}pair_style otf {spec}\npair_coeff * * Ar\nfix nve all nve\n"
            f"fix t all otf/train {FIX}\n{THERMO}restart {RESTART_EVERY} r.*.restart\n"
            f"run {STEPS} upto\n")


def kill_session(session_id):
    """SIGKILL to every process of the session (mpirun's ranks included)."""
    for _ in range(200):
        left = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session_id and fields[0] != "Z":
                left.append(int(entry))
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def killed_run(ctx, spec, frames_before_kill, extra_delay):
    """Starts the fresh run and kills it once the journal holds frames_before_kill frames and a
    restart file exists, after extra_delay seconds more (a kill at any moment of a step)."""
    w = ctx.workdir
    (w / "in.killed").write_text(fresh_script(ctx, spec))
    command = [ctx.lmp, "-in", "in.killed", "-log", "killed.log"]
    if ctx.np > 1:
        command = [ctx.mpiexec, "--allow-run-as-root", "--oversubscribe", "-np",
                   str(ctx.np)] + command
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LAMMPS_PLUGIN_PATH", None)
    process = subprocess.Popen(command, cwd=w, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    journal = w / "journal.extxyz"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if (journal.exists() and journal.read_text().count("Lattice=") >= frames_before_kill
                    and restart_files(w)):
                time.sleep(extra_delay)
                break
            time.sleep(0.005)
        finished = process.poll() is not None
        kill_session(process.pid)
    finally:
        kill_session(process.pid)
        process.wait()
    return finished


def restart_files(w):
    found = []
    for path in w.glob("r.*.restart"):
        match = re.fullmatch(r"r\.(\d+)\.restart", path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def frame_key(frame):
    return (frame["step"], int(frame["info"]["call"]), frame["energy"], tuple(frame["virial"]),
            tuple(map(tuple, frame["positions"])), tuple(map(tuple, frame["forces"])))


def clean(w):
    for path in list(w.glob("r.*.restart")) + [w / "journal.extxyz"]:
        if path.exists():
            path.unlink()


def test(ctx):
    spec = write_argon_spec(ctx)
    w = ctx.workdir
    clean(w)
    whole = run_lammps(ctx, fresh_script(ctx, spec), name="in.whole")
    expected_journal = [frame_key(f) for f in read_journal(w / "journal.extxyz")]
    final = whole.thermo[-1][-1]
    expect(final["f_t[9]"] == len(expected_journal),
           f"uninterrupted: {final['f_t[9]']} reference calls, {len(expected_journal)} journalled")
    expect(final["f_t[13]"] > 0 and final["f_t[14]"] > 0,
           "uninterrupted: the model never drove or was never checked into a label")

    rng = random.Random(35 + ctx.np)
    first_restart_calls = RESTART_EVERY + 1  # the reference drives the first steps
    replayed = []
    repeated_from_journal = 0
    for kill in range(KILLS):
        clean(w)
        target = rng.randint(first_restart_calls, len(expected_journal) - 1)
        delay = rng.uniform(0.0, 0.02)  # a step takes about 10 ms
        finished = killed_run(ctx, spec, target, delay)
        expect(not finished, f"kill {kill}: the run ended before the kill")
        killed_frames = read_journal(w / "journal.extxyz")
        restarts = restart_files(w)
        expect(restarts, f"kill {kill}: no restart file")
        # A kill while a restart file is written leaves it cut short: the one before it is the
        # last whole one.
        resumed = None
        for restart in reversed(restarts):
            resumed = run_lammps(ctx, resume_script(ctx, spec, restart.name),
                                 name=f"in.resume{kill}", check=False)
            if resumed.returncode == 0:
                break
        expect(resumed.returncode == 0,
               f"kill {kill}: the resumed run failed:\n{resumed.stdout[-3000:]}")
        restart_step = int(re.fullmatch(r"r\.(\d+)\.restart", restart.name).group(1))
        after = [f for f in killed_frames if f["step"] > restart_step]
        if after:
            expect_in(f"{len(after)} label(s) journalled after the restart file", resumed.log,
                      f"kill {kill}: resumed log")
        # The reference drove the restart step: LAMMPS' setup evaluates it again, from the
        # journal (no new call).
        drove = {int(row["Step"]): row["f_t[11]"] == 0 for row in whole.thermo[-1]}
        if drove.get(restart_step):
            expect_in(f"step {restart_step}: the restart step's forces come from the label journal",
                      resumed.log, f"kill {kill}: resumed log")
        journal = [frame_key(f) for f in read_journal(w / "journal.extxyz")]
        expect(journal == expected_journal,
               f"kill {kill} (restart step {restart_step}, {len(killed_frames)} frames at the "
               f"kill): the journal differs from the uninterrupted run's: steps/calls "
               f"{[k[:2] for k in journal]} vs {[k[:2] for k in expected_journal]}")
        last = resumed.thermo[-1][-1]
        expect(last["Step"] == STEPS, f"kill {kill}: ended at step {last['Step']}")
        for column in COLUMNS:
            expect(last[column] == final[column],
                   f"kill {kill} (restart step {restart_step}): {column} {last[column]!r} after "
                   f"the resume, {final[column]!r} uninterrupted")
        replayed.append(len(after))
        repeated_from_journal += bool(drove.get(restart_step))
        print(f"np {ctx.np}, kill {kill}: killed after {len(killed_frames)} journalled labels, "
              f"resumed from step {restart_step} replaying {len(after)}; journal of "
              f"{len(journal)} labels, reference calls {last['f_t[9]']:.0f}, buffer "
              f"{last['f_t[8]']:.0f}, optimizer steps {last['f_t[7]']:.0f} as uninterrupted")
    expect(sum(1 for n in replayed if n > 0) >= KILLS // 2,
           f"too few kills left labels to replay after the last restart file: {replayed}")
    print(f"np {ctx.np}: {repeated_from_journal} resume(s) took the restart step's forces from "
          f"the journal")
    check_other_path(ctx, spec, rng)


def check_other_path(ctx, spec, rng):
    """A resumed run whose MD goes another way (the velocities scaled after read_restart) reaches
    none of the journalled configurations: those labels are learned from the journal all the
    same, counted once, and the new calls follow them in the journal."""
    w = ctx.workdir
    clean(w)
    # Labels 28 to 42 are those of steps 61 to 75 (between two restart files); the kill comes a
    # few labels after the one waited for.
    killed_run(ctx, spec, rng.randint(29, 35), 0.0)
    restart = restart_files(w)[-1]
    restart_step = int(re.fullmatch(r"r\.(\d+)\.restart", restart.name).group(1))
    killed_frames = read_journal(w / "journal.extxyz")
    after = [f for f in killed_frames if f["step"] > restart_step]
    expect(after, "the kill left no label after the last restart file")
    script = resume_script(ctx, spec, restart.name).replace(
        "fix nve all nve\n", "fix nve all nve\nvelocity all scale 75\n")
    resumed = run_lammps(ctx, script, name="in.resume-other")
    expect_in(f"{len(after)} label(s) journalled after the restart file", resumed.log)
    expect_in("journalled label(s) the resumed MD did not reach again learned from the journal",
              resumed.log)
    frames = read_journal(w / "journal.extxyz")
    calls = [int(f["info"]["call"]) for f in frames]
    expect(calls == list(range(1, len(frames) + 1)),
           f"call numbers not 1..{len(frames)} in order: {calls}")
    expect(frames[:len(killed_frames)] == killed_frames, "the killed run's labels changed")
    last = resumed.thermo[-1][-1]
    expect(last["f_t[9]"] == len(frames),
           f"{last['f_t[9]']} reference calls counted, {len(frames)} journalled")
    print(f"np {ctx.np}: another path after the restart at step {restart_step}: {len(after)} "
          f"journalled labels learned from the journal, {len(frames) - len(killed_frames)} new "
          f"calls after them; {len(frames)} calls counted and journalled once each")


if __name__ == "__main__":
    main(test)

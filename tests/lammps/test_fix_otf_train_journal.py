"""The label journal survives a kill: LAMMPS is killed with SIGKILL in the middle of a training
run; every label journalled before the kill reads back (here and, where Debian's ASE is
installed, with ase.io.read), and a warm start from the journal refills the replay buffer and
continues training. Files in other units or with an element the model does not know are errors
that name the file.
"""
import os
import signal
import subprocess
import time

from ipi_common import read_journal
from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec, write_spec

ASE_PYTHON = "/usr/bin/python3"


def kill_session(session_id):
    """SIGKILL to every process of the session (mpirun puts its ranks in their own process
    groups, so killing the group of mpirun is not enough); returns once none is left."""
    for _ in range(200):
        left = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # After the command name: state, ppid, pgrp, session.
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


def test(ctx):
    spec = write_argon_spec(ctx)
    w = ctx.workdir
    journal = w / "killed.extxyz"
    script = argon_script(ctx, spec, fix=f"{ARGON_LJ_REFERENCE} every 1 lr 1e-3 drive reference "
                                         f"journal {journal.name}", steps=100000, thermo=100)
    (w / "in.killed").write_text(script)
    command = [ctx.lmp, "-in", "in.killed", "-log", "killed.log"]
    if ctx.np > 1:
        command = [ctx.mpiexec, "--allow-run-as-root", "--oversubscribe", "-np", str(ctx.np)] + command
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LAMMPS_PLUGIN_PATH", None)
    process = subprocess.Popen(command, cwd=w, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if journal.exists() and journal.read_text().count("Lattice=") >= 30:
                break
            expect(process.poll() is None, "LAMMPS ended before the kill")
            time.sleep(0.05)
        kill_session(process.pid)
    finally:
        kill_session(process.pid)
        process.wait()
    frames = read_journal(journal)
    steps = [f["step"] for f in frames]
    expect(len(frames) >= 30, f"only {len(frames)} frames read back")
    expect(steps == list(range(len(frames))), f"journalled steps not consecutive: {steps[:40]}")
    expect(all(len(f["forces"]) == 32 and f["species"] == ["Ar"] * 32 for f in frames),
           "a frame is incomplete")
    print(f"np {ctx.np}: killed with SIGKILL after {len(frames)} journalled labels; all read back")

    ase = subprocess.run([ASE_PYTHON, "-c", "import ase.io, sys; "
                          "f = ase.io.read(sys.argv[1], index=':'); "
                          "print(len(f), f[-1].get_potential_energy(), f[-1].get_forces()[0][0])",
                          str(journal)], capture_output=True, text=True)
    # scripts/setup.sh installs python3-ase; without it this check fails.
    expect(ase.returncode == 0, f"ase.io.read failed: {ase.stderr[-1500:]}")
    count, energy, force = ase.stdout.split()
    # Each frame is one write() followed by fsync: the kill leaves whole frames only.
    expect(int(count) == len(frames), f"ASE read {count} frames, we read {len(frames)}")
    last = frames[-1]
    expect(abs(float(energy) - last["energy"]) <= 1e-12 * abs(last["energy"]),
           "ASE energy differs")
    expect(abs(float(force) - last["forces"][0][0]) <= 1e-12, "ASE force differs")
    print(f"ase.io.read reads {count} frames of the journal")

    # Warm start: the buffer is refilled and trained on before step 0.
    warm = run_lammps(ctx, argon_script(
        ctx, spec, fix=f"{ARGON_LJ_REFERENCE} every 5 lr 1e-3 drive reference buffer 1000 "
                       f"warm_start {journal.name}", steps=10, thermo=5), name="in.warm")
    expect_in(f"warm start: {len(frames)} labelled frame(s)", warm.log, "warm-start log")
    first = warm.thermo[0][0]
    expect(first["f_t[8]"] == len(frames) + 1, f"buffer at step 0: {first['f_t[8]']}")
    expect(first["f_t[7]"] >= len(frames) // 2, f"optimizer steps at step 0: {first['f_t[7]']}")
    expect(first["f_t[3]"] > 0, "no validation after the warm start")
    print(f"warm start: buffer {first['f_t[8]']:.0f} frames and {first['f_t[7]']:.0f} optimizer "
          f"steps at step 0")

    # Mismatches are errors naming the file.
    real = argon_script(ctx, write_spec(ctx, "argon-real.json", elements=("Ar",), cutoff=5.0,
                                        dtype="float32", committee_size=2, units="real"),
                        fix=f"{ARGON_LJ_REFERENCE} warm_start {journal.name}", steps=0)
    real = real.replace("units metal", "units real")
    result = run_lammps(ctx, real, name="in.real", check=False)
    expect(result.returncode != 0 and "in units metal, this run in units real" in result.stdout,
           f"units mismatch not named: {result.stdout[-800:]}")
    neon = write_spec(ctx, "neon.json", elements=("Ne",), cutoff=5.0, dtype="float32",
                      committee_size=2)
    script = argon_script(ctx, neon, fix=f"{ARGON_LJ_REFERENCE} warm_start {journal.name}",
                          steps=0).replace("pair_coeff * * Ar", "pair_coeff * * Ne")
    result = run_lammps(ctx, script, name="in.neon", check=False)
    expect(result.returncode != 0 and "has element Ar, which the model does not know" in
           result.stdout, f"element mismatch not named: {result.stdout[-800:]}")
    result = run_lammps(ctx, argon_script(ctx, spec, fix=f"{ARGON_LJ_REFERENCE} warm_start "
                                                         f"missing.extxyz", steps=0),
                        name="in.missing", check=False)
    expect(result.returncode != 0 and "missing.extxyz" in result.stdout,
           f"missing file not named: {result.stdout[-800:]}")
    print("units, element and missing-file errors named")


if __name__ == "__main__":
    main(test)

"""reference ipi: an i-PI client (tests/ipi/ipi_test_client.py, Lennard-Jones computed as
pair_style lj/cut does) gives the same labels as the pair style itself, to 1e-10 relative
(energies, forces, virials of every journalled label), and training through it reproduces the
pair-style reference run's loss history (float32, relative 1e-5), over a UNIX socket and over
TCP (port 0: a free port handed to the client), on the ranks CTest gives (1 and 2). The client is
started and stopped by the fix; after the run no client process is left.
"""
import subprocess

from ipi_common import client_command, compare_journals, read_journal, unique_name
from lammps_harness import expect, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, relative_error, write_argon_spec

TRAINING = "every 2 steps_per_frame 2 batch 3 lr 3e-3 precision float32 drive reference " \
           "validation 0.3"


def test(ctx):
    spec = write_argon_spec(ctx)
    np = ctx.np
    pair = run_lammps(ctx, argon_script(
        ctx, spec, fix=f"{ARGON_LJ_REFERENCE} {TRAINING} journal pair.extxyz", steps=30,
        thermo=2), name="in.pair")
    name = unique_name(f"labels{np}")
    ipi = run_lammps(ctx, argon_script(
        ctx, spec, fix=f"reference ipi unix {name} client \"{client_command()}\" "
                       f"client_log client.log timeout 60 connect_timeout 60 {TRAINING} "
                       f"journal ipi.extxyz", steps=30, thermo=2), name="in.ipi")
    expect("i-PI server listening on unix:/tmp/ipi_" + name in ipi.log, "no listening line")

    pair_frames = read_journal(ctx.workdir / "pair.extxyz")
    ipi_frames = read_journal(ctx.workdir / "ipi.extxyz")
    # drive reference: every step is a reference call (31 with setup), all journalled.
    expect(len(ipi_frames) == 31, f"{len(ipi_frames)} journalled ipi answers, expected 31")
    worst = compare_journals(ipi_frames, pair_frames, rtol=1e-10, what="ipi vs pair labels")
    print(f"np {np}: {len(ipi_frames)} labels over UNIX equal the pair style's: energy "
          f"{worst['energy']:.2g}, forces {worst['forces']:.2g}, virial {worst['virial']:.2g}")

    calls_pair = pair.last("f_t[9]")
    calls_ipi = ipi.last("f_t[9]")
    expect(calls_pair == calls_ipi == 31, f"reference calls {calls_pair} vs {calls_ipi}")
    expect(ipi.last("f_t[16]") == 0 and ipi.last("f_t[17]") == 0, "failures counted")
    loss_pair = pair.column("f_t[1]")
    loss_ipi = ipi.column("f_t[1]")
    expect(max(loss_pair) > 0, "no training loss")
    difference = relative_error(loss_ipi, loss_pair)
    print(f"np {np}: loss history over {len(loss_pair)} rows differs by {difference:.3g}")
    expect(difference <= 1e-5, f"loss history differs by {difference:.3g}:\n{loss_pair}\n{loss_ipi}")

    # TCP on the loopback address, port chosen by the system.
    tcp = run_lammps(ctx, argon_script(
        ctx, spec, fix=f"reference ipi inet 0 client \"{client_command(unix=False)}\" "
                       f"timeout 60 {TRAINING} journal tcp.extxyz", steps=10, thermo=2),
        name="in.tcp")
    expect("i-PI server listening on inet:127.0.0.1:" in tcp.log, "no TCP listening line")
    tcp_frames = read_journal(ctx.workdir / "tcp.extxyz")
    worst = compare_journals(tcp_frames, pair_frames[:len(tcp_frames)], rtol=1e-10,
                             what="TCP vs pair labels")
    print(f"np {np}: {len(tcp_frames)} labels over TCP equal the pair style's (forces "
          f"{worst['forces']:.2g})")

    # The fix stopped the clients it started.
    left = subprocess.run(["pgrep", "-f", "ipi_test_client.py.*" + name],
                          capture_output=True, text=True).stdout.split()
    expect(not left, f"client processes left running: {left}")


if __name__ == "__main__":
    main(test)

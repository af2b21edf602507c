"""reference ipi when things go wrong: a client that dies in a call, hangs (timeout), disconnects,
answers garbage, NaN forces, a wrong atom count or an unconverged SCF, or never connects. Each
gives the documented behaviour: a retry with a restarted client (counted in f_t[17], warned), a
skipped label while the model drives (f_t[16]), or a LAMMPS error naming the cause while the
reference drives; never a hang or a crash; the journal holds every label that was received. Also
a client started by hand, and the keyword and address errors.
"""
import os
import socket
import time

from ipi_common import client_command, read_journal, start_client, unique_name
from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import argon_script, finite, write_argon_spec

STEPS = 12
LABELS = STEPS // 2 + 1   # every 2, step 0 included


def run(ctx, spec, name, fix_text, *, check=True, steps=STEPS, timeout=300):
    started = time.monotonic()
    result = run_lammps(ctx, argon_script(ctx, spec, fix=fix_text, steps=steps, thermo=2),
                        name=f"in.{name}", check=check, timeout=timeout)
    return result, time.monotonic() - started


def ipi_fix(ctx, tag, *, client="", extra="", drive="model"):
    name = unique_name(tag)
    text = f"reference ipi unix {name} "
    if client:
        text += f"client \"{client}\" client_log {tag}.client.log "
    return text + (f"every 2 lr 3e-3 drive {drive} validation 0.3 timeout 20 connect_timeout 20 "
                   f"journal {tag}.extxyz {extra}")


def error_line(result):
    lines = [l for l in (result.stdout + result.log).splitlines() if l.startswith("ERROR")]
    return lines[0] if lines else ""


def test(ctx):
    spec = write_argon_spec(ctx)
    w = ctx.workdir

    # Recovered by a retry: die, hang (2 s timeout), disconnect, each once on the 2nd call.
    for fault, extra in (("die", ""), ("hang", "timeout 2"), ("disconnect", "")):
        client = client_command(fault=fault, fault_at=2, fault_once=w / f"{fault}.once")
        result, seconds = run(ctx, spec, fault, ipi_fix(ctx, fault, client=client, extra=extra))
        expect(result.last("f_t[17]") == 1, f"{fault}: {result.last('f_t[17]')} failed attempts")
        expect(result.last("f_t[16]") == 0, f"{fault}: a label was skipped")
        expect(result.last("f_t[9]") == LABELS, f"{fault}: {result.last('f_t[9]')} calls")
        expect_in("restarting the client and trying again", result.log, f"{fault} log")
        frames = read_journal(w / f"{fault}.extxyz")
        expect(len(frames) == LABELS, f"{fault}: {len(frames)} journalled labels")
        expect(finite(result.column("PotEng")), f"{fault}: non-finite energy")
        print(f"{fault}: retried once, {len(frames)} labels journalled, {seconds:.1f} s")

    # Given up while the model drives: every attempt returns NaN forces -> labels skipped.
    client = client_command(fault="nan")
    result, seconds = run(ctx, spec, "nan", ipi_fix(ctx, "nan", client=client, extra="retries 1"))
    expect(result.last("f_t[16]") == LABELS, f"nan: {result.last('f_t[16]')} skipped labels")
    expect(result.last("f_t[17]") == 2 * LABELS, f"nan: {result.last('f_t[17]')} failures")
    expect(result.last("f_t[9]") == 0 and result.last("f_t[7]") == 0, "nan: trained anyway")
    expect_in("label skipped, the model drives on", result.log, "nan log")
    expect_in("is nan", result.log.lower(), "nan log")
    expect(not (w / "nan.extxyz").exists() or (w / "nan.extxyz").read_text() == "",
           "nan: a rejected answer was journalled")
    print(f"nan: {LABELS} labels skipped after 2 attempts each, run went on ({seconds:.1f} s)")

    # Given up while the reference drives: a LAMMPS error that names the cause, quickly.
    for fault, words in (("garbage", "XXXX"), ("wrong-count", "atoms"),
                         ("not-converged", "converged"), ("nan", "is nan")):
        client = client_command(fault=fault)
        result, seconds = run(ctx, spec, f"{fault}-drive",
                              ipi_fix(ctx, f"{fault}-drive", client=client, extra="retries 1",
                                      drive="reference"), check=False)
        line = error_line(result)
        expect(result.returncode != 0, f"{fault}: lmp exited 0")
        expect("the reference drives the MD but could not label step 0" in line and
               words.lower() in line.lower(), f"{fault}: error line {line!r}")
        print(f"{fault} while the reference drives: {line[:150]}... ({seconds:.1f} s)")

    # A client that never connects: an error after connect_timeout (2 s, no retries).
    client = client_command(fault="never-connect")
    result, seconds = run(ctx, spec, "never", ipi_fix(
        ctx, "never", client=client, drive="reference", extra="connect_timeout 2 retries 0"),
        check=False)
    line = error_line(result)
    expect(result.returncode != 0 and "connect" in line, f"never-connect: {line!r}")
    expect(seconds < 60, f"never-connect took {seconds:.0f} s")
    print(f"never-connect: {line[:160]} ({seconds:.1f} s)")

    # A client started by hand before LAMMPS (no client keyword), UNIX and TCP.
    name = unique_name("byhand")
    process = start_client(["--unix", name], w / "byhand.client.log")
    try:
        fix = (f"reference ipi unix {name} every 2 lr 3e-3 drive reference validation 0.3 "
               f"timeout 20 connect_timeout 30 journal byhand.extxyz")
        result, _ = run(ctx, spec, "byhand", fix)
        expect(result.last("f_t[9]") == STEPS + 1, f"by hand: {result.last('f_t[9]')} calls")
        expect(process.wait(timeout=20) == 0, "the hand-started client did not exit on EXIT")
    finally:
        process.kill()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    process = start_client(["--inet", f"127.0.0.1:{port}"], w / "byhand-tcp.client.log")
    try:
        fix = (f"reference ipi inet {port} every 2 lr 3e-3 drive reference validation 0.3 "
               f"timeout 20 connect_timeout 30 journal none")
        result, _ = run(ctx, spec, "byhand-tcp", fix)
        expect(result.last("f_t[9]") == STEPS + 1, "by hand over TCP: wrong call count")
        expect(not (w / "labels-t.extxyz").exists(), "journal none wrote a journal")
    finally:
        process.kill()
    print("clients started by hand (UNIX and TCP) served every call")

    # Keyword and address errors.
    cases = [
        ("reference ipi tcp 5", "reference ipi takes unix <name> or inet"),
        ("reference ipi unix a/b", "without '/'"),
        ("reference ipi inet 70000", "inet <port>"),
        ('reference "lj/cut 8.5" coeff "* * 0.0104 3.405" client "true"', "belongs to reference ipi"),
        (f"reference ipi unix {unique_name('kw')} retries -1", "retries"),
        (f"reference ipi unix {unique_name('kw')} timeout 0", "timeout"),
        (f"reference ipi unix {unique_name('kw')} journal \"\"", "journal"),
        (f"reference ipi unix {'x' * 120}", "over the limit"),
    ]
    listener = socket.socket(socket.AF_UNIX)
    busy = unique_name("busy")
    listener.bind(f"/tmp/ipi_{busy}")
    listener.listen(1)
    cases.append((f"reference ipi unix {busy}", "in use"))
    try:
        for fix, words in cases:
            result, _ = run(ctx, spec, "kw", fix, check=False, steps=0)
            line = error_line(result)
            expect(result.returncode != 0 and words in line, f"{fix!r}: error line {line!r}")
    finally:
        listener.close()
        os.unlink(f"/tmp/ipi_{busy}")
    print(f"{len(cases)} keyword and address errors named")


if __name__ == "__main__":
    main(test)

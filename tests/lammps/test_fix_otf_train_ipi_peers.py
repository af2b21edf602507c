"""reference ipi: only our own client (issue 35). The UNIX socket file is private (mode 0600), so a
process of another user cannot even connect; on loopback TCP another user's connection is refused
with a WARNING naming it (uid from /proc/net/tcp) and the run goes on with the right client; with
a client the fix started, a process of the same user that is not that client is refused too; a
server asked to listen beyond loopback warns. A client started by hand that fails while the
reference drives gives an ERROR naming the cause (not the reconnect that followed), and the
socket file is gone after that ERROR exit.
"""
import os
import re
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

from ipi_common import CLIENT, CLIENT_PYTHON, LJ_ARGS, start_client, unique_name
from lammps_harness import expect, expect_in, fail, main, run_lammps
from pair_otf_common import argon_script, write_argon_spec

STEPS = 4
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# Run as another user: connects (retrying until the server listens, up to 20 s), then reports
# what happened: "connect-error <errno name>", or "closed" when the server hung up on it.
INTRUDER = r"""
import errno, socket, sys, time
kind, where = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 20
while True:
    s = socket.socket(socket.AF_UNIX if kind == "unix" else socket.AF_INET)
    try:
        s.connect(where if kind == "unix" else ("127.0.0.1", int(where)))
        break
    except OSError as e:
        s.close()
        if e.errno in (errno.EACCES, errno.EPERM) or time.monotonic() > deadline:
            print("connect-error", errno.errorcode.get(e.errno, e.errno)); sys.exit(0)
        time.sleep(0.05)
s.settimeout(10)
try:
    s.sendall(b"HELLO       ")
    print("closed" if s.recv(12) == b"" else "answered")
except OSError as e:
    print("closed", e)
"""


def run(ctx, spec, name, fix_text, *, check=True, steps=STEPS):
    return run_lammps(ctx, argon_script(ctx, spec, fix=fix_text, steps=steps, thermo=2),
                      name=f"in.{name}", check=check, timeout=120)


def error_line(result):
    lines = [l for l in (result.stdout + result.log).splitlines() if l.startswith("ERROR")]
    return lines[0] if lines else ""


def wait_for(path, seconds=30):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            fail(f"{path} did not appear")
        time.sleep(0.05)


def intrude(kind, where, *, user=NOBODY):
    out = subprocess.run(user + [CLIENT_PYTHON, "-c", INTRUDER, kind, str(where)],
                         capture_output=True, text=True, timeout=60)
    return (out.stdout + out.stderr).strip()


def in_background(function):
    """Runs function in a thread; returns a callable giving its result (or raising its error)."""
    box = {}

    def body():
        try:
            box["value"] = function()
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            box["error"] = error

    thread = threading.Thread(target=body)
    thread.start()

    def result():
        thread.join(timeout=120)
        if "error" in box:
            raise box["error"]
        return box.get("value")
    return result


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test(ctx):
    spec = write_argon_spec(ctx)
    w = ctx.workdir
    fixed = "every 2 lr 3e-3 drive reference validation 0.3 timeout 20 journal none"

    # UNIX: the file is a private socket; another user cannot connect; ours then serves the run.
    name = unique_name("peer-unix")
    path = f"/tmp/ipi_{name}"

    def unix_intruder():
        wait_for(path)
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        report = intrude("unix", path)
        client = start_client(["--unix", name], w / "peer-unix.client.log")
        return mode, report, client

    background = in_background(unix_intruder)
    result = run(ctx, spec, "peer-unix", f"reference ipi unix {name} connect_timeout 30 {fixed}")
    mode, report, client = background()
    try:
        expect(mode == 0o600, f"the socket file has mode {oct(mode)}, expected 0o600")
        expect(report == "connect-error EACCES", f"another user's connect: {report!r}")
        expect(result.last("f_t[9]") == STEPS + 1, f"unix: {result.last('f_t[9]')} calls")
        expect(not os.path.exists(path), "the socket file is left after the run")
    finally:
        client.kill()
    print(f"unix: socket mode {oct(mode)}, uid 65534 got {report}; our client served "
          f"{int(result.last('f_t[9]'))} calls")

    # TCP loopback: another user's connection is accepted by the kernel, refused by the peer check.
    port = free_port()

    def tcp_intruder():
        report = intrude("inet", port)
        client = start_client(["--inet", f"127.0.0.1:{port}"], w / "peer-tcp.client.log")
        return report, client

    background = in_background(tcp_intruder)
    result = run(ctx, spec, "peer-tcp", f"reference ipi inet {port} connect_timeout 30 {fixed}")
    report, client = background()
    try:
        expect(report.startswith("closed"), f"another user's TCP connection: {report!r}")
        warning = re.search(r"WARNING: .*refused a connection from 127\.0\.0\.1:\d+ "
                            r"\(pid unknown, uid 65534\): it runs as uid 65534, not as this "
                            r"run's uid (\d+); waiting for the right client", result.log)
        expect(warning is not None and int(warning.group(1)) == os.geteuid(),
               "no WARNING naming the refused TCP peer in the log")
        expect(result.last("f_t[9]") == STEPS + 1, f"tcp: {result.last('f_t[9]')} calls")
    finally:
        client.kill()
    print(f"tcp: uid 65534 {report.split()[0]} with {warning.group(0)[9:90]}...; "
          f"our client served {int(result.last('f_t[9]'))} calls")

    # A client the fix starts (after 3 s): a process of our own user that is not it is refused.
    name = unique_name("peer-started")
    path = f"/tmp/ipi_{name}"
    command = f"sleep 3; exec {CLIENT_PYTHON} {CLIENT} --unix {{host}} {LJ_ARGS}"

    def same_user_intruder():
        wait_for(path)
        return intrude("unix", path, user=[])

    background = in_background(same_user_intruder)
    result = run(ctx, spec, "peer-started",
                 f"reference ipi unix {name} client \"{command}\" connect_timeout 30 {fixed}")
    report = background()
    expect(report.startswith("closed"), f"a same-user stranger: {report!r}")
    expect_in("it is not the client this run started (pid", result.log, "peer-started log")
    expect(result.last("f_t[9]") == STEPS + 1, f"started: {result.last('f_t[9]')} calls")
    print(f"started client: a stranger of the same user was {report}, the client served "
          f"{int(result.last('f_t[9]'))} calls")

    # Listening beyond loopback only when asked, and then with a warning.
    result = run(ctx, spec, "peer-any", f"reference ipi inet 0.0.0.0:{free_port()} "
                 "every 2 drive model connect_timeout 1 retries 0 journal none", steps=0)
    expect_in("beyond the loopback address", result.log, "inet 0.0.0.0 log")
    result = run(ctx, spec, "peer-lo", f"reference ipi inet {free_port()} "
                 "every 2 drive model connect_timeout 1 retries 0 journal none", steps=0)
    expect("beyond the loopback address" not in result.log, "inet <port> warned about loopback")
    print("inet 0.0.0.0 warns that it listens beyond loopback; inet <port> does not")

    # Hand-started clients that fail while the reference drives: the ERROR names the cause (the
    # garbage, the NaN), not the reconnect that timed out after it; the socket file is removed.
    for fault, words in (("garbage", "XXXX"), ("nan", "is nan")):
        name = unique_name(f"hand-{fault}")
        path = f"/tmp/ipi_{name}"
        client = start_client(["--unix", name, "--fault", fault], w / f"hand-{fault}.client.log")
        try:
            result = run(ctx, spec, f"hand-{fault}", f"reference ipi unix {name} every 2 lr 3e-3 "
                         "drive reference timeout 20 connect_timeout 2 retries 1 journal none",
                         check=False)
        finally:
            client.kill()
        line = error_line(result)
        expect(result.returncode != 0, f"hand-{fault}: lmp exited 0")
        cause = line.partition("cause: ")[2]
        expect(words.lower() in cause.lower().partition("; then")[0],
               f"hand-{fault}: the ERROR does not name the cause first: {line!r}")
        expect("failed 2 time(s) on step 0" in line and "no client connected within 2 s" in line,
               f"hand-{fault}: {line!r}")
        expect(not os.path.exists(path), f"hand-{fault}: {path} left after the ERROR exit")
        print(f"hand-started {fault}: {line[:200]}...; socket file removed")


if __name__ == "__main__":
    main(test)

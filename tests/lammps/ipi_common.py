"""Shared pieces of the reference-ipi tests: the i-PI test client (tests/ipi/ipi_test_client.py,
Lennard-Jones computed as pair_style lj/cut does), a reader of the label journal that needs no
ASE, and the argon run the tests compare with a pair-style reference."""

import os
import re
import shlex
import subprocess
from pathlib import Path

from lammps_harness import fail

# The client runs under Debian's interpreter (standard library only).
CLIENT_PYTHON = "/usr/bin/python3"
CLIENT = Path(__file__).resolve().parent.parent / "ipi" / "ipi_test_client.py"
LJ_ARGS = "--lj 0.0104 3.405 8.5"  # the same potential as ARGON_LJ_REFERENCE


def unique_name(tag):
    """A UNIX socket name no other test uses at the same time."""
    return f"otftest-{tag}-{os.getpid()}"


def client_command(*, unix=True, fault=None, fault_at=None, fault_once=None, calls_log=None):
    """The client command line for the fix's `client` keyword ({host}/{port} left for the fix)."""
    words = [CLIENT_PYTHON, str(CLIENT)]
    words += ["--unix", "{host}"] if unix else ["--inet", "{host}:{port}"]
    command = " ".join(shlex.quote(w) if "{" not in w else w for w in words) + " " + LJ_ARGS
    if fault:
        command += f" --fault {fault}"
    if fault_at:
        command += f" --fault-at {fault_at}"
    if fault_once:
        command += f" --fault-once {shlex.quote(str(fault_once))}"
    if calls_log:
        command += f" --calls-log {shlex.quote(str(calls_log))}"
    return command


def start_client(args, log_path):
    """A client started by hand (as a user would), in its own session so it can be killed."""
    log = open(log_path, "w")
    return subprocess.Popen([CLIENT_PYTHON, str(CLIENT)] + args + LJ_ARGS.split(),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def read_journal(path):
    """Frames of an extxyz label journal: dicts with step, energy, virial (9), and per atom
    species, positions, forces (lists in id order). Only complete frames."""
    lines = Path(path).read_text().splitlines()
    frames, i = [], 0
    while i < len(lines):
        count = int(lines[i])
        if i + 2 + count > len(lines):
            break
        info = {k: v.strip('"') for k, v in _PAIR.findall(lines[i + 1])}
        props = info["Properties"].split(":")
        columns, names = {}, []
        col = 0
        for k in range(0, len(props), 3):
            width = int(props[k + 2])
            columns[props[k]] = (col, width)
            col += width
        atoms = [line.split() for line in lines[i + 2:i + 2 + count]]
        pick = lambda name: [[float(w) for w in a[columns[name][0]:sum(columns[name])]]
                             for a in atoms]
        frames.append({
            "step": int(info.get("step", -1)),
            "energy": float(info["energy"]),
            "virial": [float(x) for x in info["virial"].split()],
            "species": [a[0] for a in atoms],
            "positions": pick("pos"),
            "forces": pick("forces"),
            "ids": ([int(a[columns["id"][0]]) for a in atoms] if "id" in columns
                    else list(range(1, count + 1))),
            "info": info,
        })
        i += 2 + count
    if not frames:
        fail(f"no complete frame in {path}")
    return frames


def compare_journals(actual, expected, *, rtol, what):
    """Same steps, and energy, forces and virial equal to rtol (relative to each quantity's
    largest magnitude). Returns the largest relative differences."""
    steps_a = [f["step"] for f in actual]
    steps_e = [f["step"] for f in expected]
    if steps_a != steps_e:
        fail(f"{what}: labelled steps differ: {steps_a} vs {steps_e}")
    worst = {"energy": 0.0, "forces": 0.0, "virial": 0.0}
    for a, e in zip(actual, expected):
        scale = abs(e["energy"])
        worst["energy"] = max(worst["energy"], abs(a["energy"] - e["energy"]) / scale)
        fa = [x for row in a["forces"] for x in row]
        fe = [x for row in e["forces"] for x in row]
        fscale = max(abs(x) for x in fe)
        worst["forces"] = max(worst["forces"], max(abs(x - y) for x, y in zip(fa, fe)) / fscale)
        vscale = max(abs(x) for x in e["virial"])
        worst["virial"] = max(worst["virial"],
                              max(abs(x - y) for x, y in zip(a["virial"], e["virial"])) / vscale)
    for key, value in worst.items():
        if not value <= rtol:
            fail(f"{what}: {key} differs by {value:.3g} (relative), more than {rtol}")
    return worst

"""Runs the project's lmp on an input script, serial or under mpirun, and parses its log.

Integration tests import this module, run LAMMPS with `run_lammps`, and assert on numbers:
thermo columns (`result.thermo[i]["PotEng"]`), printed lines, exit status. CTest calls each
test script with the paths of lmp, the plugin and the number of MPI ranks (tests/lammps/CMakeLists.txt).
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LammpsResult:
    returncode: int
    log: str
    stdout: str
    stderr: str
    thermo: list = field(default_factory=list)  # one list of rows (dicts) per run/minimize

    def last(self, column, block=-1):
        return self.thermo[block][-1][column]

    def column(self, column, block=-1):
        return [row[column] for row in self.thermo[block]]


@dataclass
class Context:
    lmp: str
    plugin: str
    np: int
    mpiexec: str
    workdir: Path
    source_dir: Path
    lammps_version: str = ""        # of the LAMMPS built against, e.g. "4 Feb 2025"
    lammps_version_id: int = 0      # e.g. 20250204
    lammps_has_kokkos: bool = False


def parse_thermo(log_text):
    """Thermo blocks: the lines between a header starting with 'Step' and 'Loop time'."""
    blocks, current, header = [], None, None
    for line in log_text.splitlines():
        words = line.split()
        if words and words[0] == "Step" and current is None:
            header, current = words, []
        elif current is not None:
            if line.startswith("Loop time") or line.startswith("ERROR"):
                blocks.append(current)
                current = None
            elif len(words) == len(header):
                try:
                    current.append({h: float(w) for h, w in zip(header, words)})
                except ValueError:
                    pass  # a warning printed between thermo lines
    if current is not None:
        blocks.append(current)
    return blocks


def run_lammps(ctx, script, *, np=None, variables=None, args=(), env=None, name="in.test",
               timeout=600, check=True):
    """Runs lmp on `script` (text) in ctx.workdir; returns a LammpsResult."""
    np = ctx.np if np is None else np
    input_path = ctx.workdir / name
    input_path.write_text(script)
    log_path = ctx.workdir / (name + ".log")
    command = []
    if np > 1:
        command += [ctx.mpiexec, "--allow-run-as-root", "--oversubscribe", "-np", str(np)]
    command += [ctx.lmp, "-in", str(input_path), "-log", str(log_path), "-echo", "log"]
    for key, value in (variables or {}).items():
        command += ["-var", key, str(value)]
    command += list(args)
    run_env = dict(os.environ)
    run_env.setdefault("OMP_NUM_THREADS", "1")
    run_env.pop("LAMMPS_PLUGIN_PATH", None)
    # Only Debian's own LAMMPS knows where Si.sw is; the others get their source tree's copy
    # (scripts/build-lammps.sh installs it next to lmp).
    potentials = Path(ctx.lmp).resolve().parent.parent / "share" / "lammps" / "potentials"
    if potentials.is_dir():
        run_env.setdefault("LAMMPS_POTENTIALS", str(potentials))
    run_env.update(env or {})
    proc = subprocess.run(command, cwd=ctx.workdir, env=run_env, capture_output=True, text=True,
                          timeout=timeout)
    log = log_path.read_text() if log_path.exists() else ""
    result = LammpsResult(proc.returncode, log, proc.stdout, proc.stderr, parse_thermo(log))
    if check and proc.returncode != 0:
        # With -partition the screen says little: each partition's log (NAME.log.K) has the
        # ERROR line and the input line that raised it.
        partition_errors = []
        for partition_log in sorted(ctx.workdir.glob(name + ".log.*")):
            lines = partition_log.read_text(errors="replace").splitlines()
            partition_errors += [f"{partition_log.name}: {line}" for line in lines
                                 if line.startswith(("ERROR", "Last input line"))]
        fail(f"lmp exited with {proc.returncode}: {' '.join(command)}\n"
             f"--- stdout (tail) ---\n{proc.stdout[-3000:]}\n--- stderr (tail) ---\n{proc.stderr[-3000:]}"
             + ("\n--- partition logs ---\n" + "\n".join(partition_errors) if partition_errors
                else ""))
    return result


class TestFailure(Exception):
    pass


def fail(message):
    raise TestFailure(message)


def expect(condition, message):
    if not condition:
        fail(message)


def expect_close(actual, expected, *, rtol=0.0, atol=0.0, what="value"):
    if not (math.isfinite(actual) and abs(actual - expected) <= atol + rtol * abs(expected)):
        fail(f"{what}: got {actual!r}, expected {expected!r} (rtol {rtol}, atol {atol})")


def expect_in(needle, haystack, what="log"):
    if needle not in haystack:
        fail(f"{what} does not contain {needle!r}; tail:\n{haystack[-2000:]}")


def find_line(pattern, text):
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
        fail(f"no line matches {pattern!r}; tail:\n{text[-2000:]}")
    return match


def main(test_function):
    """Entry point of a test script: parses CTest's arguments, runs the test in a scratch folder."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--np", type=int, default=1)
    parser.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--lammps-version", default="", help='e.g. "4 Feb 2025"')
    parser.add_argument("--lammps-version-id", type=int, default=0, help="e.g. 20250204")
    parser.add_argument("--lammps-kokkos", choices=("ON", "OFF"), default="OFF")
    options = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="otf-lammps-test-"))
    ctx = Context(os.path.abspath(options.lmp), os.path.abspath(options.plugin), options.np,
                  options.mpiexec, workdir,
                  Path(__file__).resolve().parent, options.lammps_version,
                  options.lammps_version_id, options.lammps_kokkos == "ON")
    try:
        test_function(ctx)
    except TestFailure as failure:
        print(f"FAILED ({Path(sys.argv[0]).stem}, np={options.np}, scratch {workdir}):\n{failure}")
        sys.exit(1)
    print(f"PASSED ({Path(sys.argv[0]).stem}, np={options.np})")
    if not options.keep:
        shutil.rmtree(workdir, ignore_errors=True)

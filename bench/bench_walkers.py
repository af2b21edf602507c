#!/usr/bin/env python3
"""Walkers against runs one after another (issue 37): the walkers example (examples/si-walkers:
silicon at 600, 1000, 1400 and 1800 K, Stillinger-Weber labels, every fix otf/train keyword at
its default) as ONE job of four LAMMPS partitions training one model, against four separate
single-partition runs of the same input, one per temperature, started one after another. Every
reference call is made expensive by `reference_delay` (an ab initio code's cost; default 10 s,
in the 13-100 s PRODUCT.md measures for CP2K). Printed, from the same run of the benchmark:
reference calls (total and per temperature), the wall time of the training runs (the walkers'
job against the sum of the four), its ratio, and the held-out force and energy RMSE of each
temperature against the main example's targets (0.05 eV/A, 2 meV/atom).

On a machine with fewer cores than walkers the four walkers share the cores (their MD is slower
than one run alone); waiting ranks yield (OMPI_MCA_mpi_yield_when_idle=1).

Interpreter: any Python 3 (standard library only).
With label_wait no (the example's) a walker's MD goes on while its reference computes a label
the model asked for: the walkers wait only for labels the reference drives with, but learn fewer
labels per MD step, so --walker-steps lets them run longer than the separate runs (--steps), and
--separate-label-wait gives the separate runs their own setting.

usage: OMP_NUM_THREADS=1 bench/bench_walkers.py --lmp LMP --plugin-dir DIR [--delay 10]
       [--steps 3000] [--walker-steps N] [--label-wait no|yes] [--separate-label-wait yes|no]
       [--out docs/bench-walkers]"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "si-walkers"
sys.path.insert(0, str(EXAMPLE))
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import cpu_description, write_report  # noqa: E402
from walkers_report import ENERGY_TARGET, FORCE_TARGET, walker_results  # noqa: E402

TEMPERATURES = (600, 1000, 1400, 1800)  # the example's, and issue 37's


def training_loop_seconds(log_text):
    """The Loop time of the run whose thermo shows fix otf/train's outputs."""
    at = log_text.find("f_train[9]")
    found = re.search(r"^Loop time of ([0-9.eE+-]+)", log_text[at:], re.MULTILINE)
    if at < 0 or not found:
        sys.exit("bench_walkers: no training run in a log")
    return float(found.group(1))


def label_steps(journal):
    """The MD steps of a label journal's frames (its comment lines' step=N)."""
    return [int(m) for m in re.findall(r" step=([0-9]+) ", journal.read_text())]


def asked_steps(learning_log):
    """The MD steps whose labels were sent to the reference in the background."""
    return [int(line.split(",")[0]) for line in learning_log.read_text().splitlines()
            if line.split(",")[1:2] == ["label_asked"]]


def run(command, folder, env):
    started = time.monotonic()
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed in {folder}:\n{result.stdout[-3000:]}\n"
                 f"{result.stderr[-3000:]}")
    return time.monotonic() - started


def prepare(folder, text):
    folder.mkdir(parents=True)
    shutil.copy(EXAMPLE / "si-spec.json", folder)
    (folder / "in.si-walkers").write_text(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin-dir", required=True)
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--delay", type=float, default=10.0, help="seconds per reference call")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--label-wait", choices=("yes", "no"), default="no",
                        help="label_wait of the walkers (the example's: no)")
    parser.add_argument("--separate-label-wait", choices=("yes", "no"),
                        help="label_wait of the separate runs (default: as the walkers')")
    parser.add_argument("--walker-steps", type=int,
                        help="training steps of the walkers (default: --steps); with label_wait "
                             "no the MD goes further per call and learns fewer labels per step")
    parser.add_argument("--temperatures", type=int, nargs=4, default=TEMPERATURES,
                        metavar="K", help="the four walkers' temperatures")
    parser.add_argument("--out", help="report prefix (PREFIX.txt, PREFIX.tsv)")
    options = parser.parse_args()
    lmp = str(Path(options.lmp).resolve())
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_mpi_yield_when_idle="1",
               LAMMPS_PLUGIN_PATH=str(Path(options.plugin_dir).resolve()))
    potentials = Path(lmp).parent.parent / "share" / "lammps" / "potentials"
    if potentials.is_dir():
        env.setdefault("LAMMPS_POTENTIALS", str(potentials))
    work = Path(tempfile.mkdtemp(prefix="bench-walkers-"))
    example_line = "variable T       world " + " ".join(str(t) for t in TEMPERATURES)
    source = (EXAMPLE / "in.si-walkers").read_text()
    if example_line not in source:
        sys.exit(f"bench_walkers: in.si-walkers no longer has the line {example_line!r}")
    temperatures = tuple(options.temperatures)
    source = source.replace(example_line,
                            "variable T       world " + " ".join(str(t) for t in temperatures))
    separate_wait = options.separate_label_wait or options.label_wait
    walker_steps = options.walker_steps or options.steps
    variables = ["-var", "delay", str(options.delay), "-var", "train_steps", str(walker_steps),
                 "-var", "label_wait", options.label_wait]
    separate_variables = ["-var", "delay", str(options.delay), "-var", "train_steps",
                          str(options.steps), "-var", "label_wait", separate_wait]

    # One job, four walkers.
    walkers_folder = work / "walkers"
    prepare(walkers_folder, source)
    launcher = [options.mpirun, "-np", "4", "--oversubscribe"]
    if os.geteuid() == 0:
        launcher.append("--allow-run-as-root")
    job_seconds = run(launcher + [lmp, "-partition", "4x1", "-in", "in.si-walkers", "-log",
                                  "log.lammps", "-screen", "none"] + variables,
                      walkers_folder, env)
    walkers = walker_results(walkers_folder, "log.lammps", range(4))
    walkers_training = max(training_loop_seconds((walkers_folder / f"log.lammps.{k}").read_text())
                           for k in range(4))

    # Four runs, one after another: the same input with this run's temperature only.
    separate, separate_training, separate_seconds = [], 0.0, 0.0
    for k, temperature in enumerate(temperatures):
        folder = work / f"single-{k}-{temperature}"
        text = source.replace("variable T       world " + " ".join(str(t) for t in temperatures),
                              f"variable T       index {temperature}")
        text = text.replace("variable walker  world 0 1 2 3", f"variable walker  index {k}")
        prepare(folder, text)
        separate_seconds += run([lmp, "-in", "in.si-walkers", "-log", "log.lammps",
                                 "-screen", "none"] + separate_variables, folder, env)
        # walker_results reads PREFIX.K and heldout-*.K.dump: name the single log alike.
        shutil.copy(folder / "log.lammps", folder / f"log.lammps.{k}")
        separate.append(walker_results(folder, "log.lammps", [k])[0])
        separate_training += training_loop_seconds((folder / "log.lammps").read_text())

    # Walkers wait for each other's labels at each step: the steps at which any walker asked for
    # one bound the job's wall time from below (steps x delay), as the sum of all calls bounds the
    # separate runs'.
    call_steps = set()
    for k in range(4):
        # A label computed in the background (label_wait no; learning log: label_asked) held up
        # no walker.
        background = set(asked_steps(walkers_folder / f"learning.walker{k}.csv"))
        call_steps.update(set(label_steps(walkers_folder / f"labels.walker{k}.extxyz")) -
                          background)
    walker_calls = sum(r["calls"] for r in walkers)
    separate_calls = sum(r["calls"] for r in separate)
    lines = [f"# bench_walkers: examples/si-walkers, reference_delay {options.delay:g} s per call, "
             f"1 rank per walker; walkers: {walker_steps} training steps, label_wait "
             f"{options.label_wait}; separate runs: {options.steps} training steps, label_wait "
             f"{separate_wait}",
             f"# CPU: {cpu_description()}, {os.cpu_count()} cores",
             "", "| temperature | walkers: calls | force RMSE (eV/A) | energy RMSE (meV/atom) | "
             "separate runs: calls | force RMSE | energy RMSE |", "|---|---|---|---|---|---|---|"]
    tsv = ["temperature\twalker_calls\twalker_force_rmse\twalker_energy_rmse\tseparate_calls\t"
           "separate_force_rmse\tseparate_energy_rmse"]
    met = True
    for temperature, w, s in zip(temperatures, walkers, separate):
        lines.append(f"| {temperature} K | {w['calls']} | {w['force_rmse']:.4f} | "
                     f"{w['energy_rmse_mev']:.3f} | {s['calls']} | {s['force_rmse']:.4f} | "
                     f"{s['energy_rmse_mev']:.3f} |")
        tsv.append(f"{temperature}\t{w['calls']}\t{w['force_rmse']:.5g}\t"
                   f"{w['energy_rmse_mev']:.5g}\t{s['calls']}\t{s['force_rmse']:.5g}\t"
                   f"{s['energy_rmse_mev']:.5g}")
        met &= w["force_rmse"] <= FORCE_TARGET and w["energy_rmse_mev"] < ENERGY_TARGET
    identical = all(r["replicas_differ"] == 0 and r["frames"] == walker_calls for r in walkers)
    speedup = separate_training / walkers_training
    lines += ["",
              f"reference calls: walkers {walker_calls}, separate runs {separate_calls} "
              f"({'no more' if walker_calls <= separate_calls else 'MORE'} than separate runs)",
              f"training wall time: walkers {walkers_training:.1f} s, separate runs one after "
              f"another {separate_training:.1f} s: {speedup:.2f}x shorter "
              f"({'meets' if speedup >= 3 else 'misses'} the 3x target)",
              f"steps at which some walker waited for a reference call: {len(call_steps)} "
              f"(the walkers' job waits at least {len(call_steps)} x {options.delay:g} s; the "
              f"separate runs {separate_calls} x {options.delay:g} s: the ratio of those is "
              f"{separate_calls / max(len(call_steps), 1):.2f})",
              f"whole job (held-out MD and tests included): walkers {job_seconds:.1f} s, separate "
              f"{separate_seconds:.1f} s",
              f"targets (force RMSE <= {FORCE_TARGET} eV/A, energy RMSE < {ENERGY_TARGET} "
              f"meV/atom) at every temperature with the walkers' model: {'met' if met else 'MISSED'}; "
              f"one model: every walker holds all {walker_calls} labels, replicas identical: "
              f"{identical}"]
    tsv.append(f"# training seconds walkers {walkers_training:.3f} separate {separate_training:.3f}")
    write_report(options.out, "\n".join(lines), tsv)
    shutil.rmtree(work, ignore_errors=True)
    return 0 if met and identical and walker_calls <= separate_calls else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""On-the-fly training cost of the Si example (examples/si-sw), measured in one run:

1. The whole example (3000 training steps with drive auto, held-out test, 10 ps NVE) in float32,
   bfloat16 and float16: the training phase's wall time against MD of the same system driven by
   Stillinger-Weber alone for the same number of steps (same run of this script), the whole
   example's wall time, and the accuracy report (held-out force and energy RMSE, reference calls
   while the model drove).
2. The cost of one training step per atom relative to one inference atom-step: two runs that
   label every step (drive reference: the untrained model is still evaluated on every step) and differ only in steps_per_frame (1 and 4) give the cost of
   the extra optimizer steps by difference of the fix's time (LAMMPS' Modify row), per optimizer
   step, per atom of the batch's frames; the inference atom-step is pair_style otf's time (Pair
   row) per step per atom in the same runs. Sizes: 64 atoms (the example) and 512.

Usage: bench_si_training.py --lmp LMP --plugin-dir DIR [--precisions float32,bfloat16,float16]
                            [--out PREFIX]
Threads: OMP_NUM_THREADS (LibTorch intra-op threads of the single rank), as set by the caller.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "si-sw"
TRAIN_STEPS = 3000


def run_lmp(lmp, plugin_dir, work, script_name, variables=()):
    env = dict(os.environ, LAMMPS_PLUGIN_PATH=str(plugin_dir))
    command = [lmp, "-in", script_name, "-log", "log.lammps"]
    for name, value in variables:
        command += ["-var", name, str(value)]
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    log = (work / "log.lammps").read_text() if (work / "log.lammps").exists() else ""
    if result.returncode != 0:
        sys.exit(f"lmp failed in {work}:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    return log


def loop_times(log):
    return [float(t) for t in re.findall(r"^Loop time of ([0-9.eE+-]+) on", log, re.MULTILINE)]


def section_times(log, section):
    """The average time of a row (Pair, Modify, ...) of each run's timing breakdown."""
    return [float(t) for t in re.findall(rf"^{section}\s*\|\s*[0-9.eE+-]+\s*\|\s*([0-9.eE+-]+)",
                                         log, re.MULTILINE)]


def reference_md(lmp, plugin_dir, work, steps):
    (work / "in.reference").write_text(f"""units metal
boundary p p p
lattice diamond 5.431
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 28.0855
velocity all create 2000.0 4928459 mom yes rot yes dist gaussian
timestep 0.001
pair_style sw
pair_coeff * * Si.sw Si
fix md all nvt temp 1000.0 1000.0 0.1
thermo 1000
run {steps}
""")
    return loop_times(run_lmp(lmp, plugin_dir, work, "in.reference"))[0]


def example(lmp, plugin_dir, work, precision):
    # The neural committee's version of the example (the engine's precisions apply to it).
    for name in ("in.si-sw-neural", "si-spec-neural.json"):
        shutil.copy(EXAMPLE / name, work / name)
    log = run_lmp(lmp, plugin_dir, work, "in.si-sw-neural", [("precision", precision)])
    times = loop_times(log)
    report = subprocess.run([sys.executable, str(ROOT / "examples" / "accuracy_report.py"),
                             "log.lammps"], cwd=work, capture_output=True, text=True).stdout
    force = float(re.search(r"held-out force RMSE ([0-9.]+) eV/A", report).group(1))
    energy = float(re.search(r"held-out energy RMSE ([0-9.]+) meV/atom", report).group(1))
    calls = re.search(r"model drove: (\d+) of (\d+) steps", report)
    return {"training_s": times[0], "example_s": sum(times), "force_rmse": force,
            "energy_rmse": energy, "model_calls": int(calls.group(1)),
            "model_steps": int(calls.group(2))}


def training_step_cost(lmp, plugin_dir, work, precision, cells, steps):
    """Seconds per optimizer step per atom of the batch, and per inference atom-step."""
    shutil.copy(EXAMPLE / "si-spec-neural.json", work / "si-spec.json")
    atoms = 8 * cells ** 3
    measured = {}
    for per_frame in (1, 4):
        (work / "in.cost").write_text(f"""units metal
boundary p p p
atom_modify map array
lattice diamond 5.431
region box block 0 {cells} 0 {cells} 0 {cells}
create_box 1 box
create_atoms 1 box
mass 1 28.0855
velocity all create 2000.0 4928459 mom yes rot yes dist gaussian
timestep 0.001
pair_style otf si-spec.json precision {precision}
pair_coeff * * Si
fix md all nvt temp 1000.0 1000.0 0.1
fix train all otf/train reference "sw" coeff "* * Si.sw Si" precision {precision} every 1 &
    steps_per_frame {per_frame} batch 1 validation 0 stats_frames 1 drive reference
thermo 1000
run 5
run {steps}
""")
        log = run_lmp(lmp, plugin_dir, work, "in.cost")
        measured[per_frame] = (section_times(log, "Modify")[-1], section_times(log, "Pair")[-1])
    extra_steps = 3 * steps
    train_per_atom = (measured[4][0] - measured[1][0]) / extra_steps / atoms
    infer_per_atom = (measured[1][1] + measured[4][1]) / 2 / steps / atoms
    return train_per_atom, infer_per_atom


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin-dir", required=True)
    parser.add_argument("--precisions", default="float32,bfloat16,float16")
    parser.add_argument("--out", default=None)
    options = parser.parse_args()
    precisions = options.precisions.split(",")
    threads = os.environ.get("OMP_NUM_THREADS", "(unset)")
    lines = [f"# Si example (examples/si-sw): 64 atoms, {TRAIN_STEPS} training steps, "
             f"OMP_NUM_THREADS={threads}, 1 rank"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="otf-bench-si-") as tmp:
        tmp = Path(tmp)
        reference = reference_md(options.lmp, options.plugin_dir, tmp, TRAIN_STEPS)
        lines.append(f"reference-only MD (pair_style sw, {TRAIN_STEPS} steps): {reference:.2f} s")
        lines.append("precision  training_s  x_reference_md  example_s  force_rmse_eV/A  "
                     "energy_rmse_meV/atom  ref_calls_model_phase  train_step/atom_s  "
                     "inference_atom_step_s  train/inference  (64 atoms)  "
                     "train/inference (512 atoms)")
        for precision in precisions:
            work = tmp / precision
            work.mkdir()
            result = example(options.lmp, options.plugin_dir, work, precision)
            costs = {}
            for cells, steps in ((2, 40), (4, 10)):
                cost_dir = work / f"cost{cells}"
                cost_dir.mkdir()
                costs[cells] = training_step_cost(options.lmp, options.plugin_dir, cost_dir,
                                                  precision, cells, steps)
            row = dict(result, precision=precision, reference_s=reference,
                       ratio=result["training_s"] / reference, train64=costs[2][0],
                       infer64=costs[2][1], train512=costs[4][0], infer512=costs[4][1])
            rows.append(row)
            lines.append(
                f"{precision:9s}  {row['training_s']:10.1f}  {row['ratio']:14.1f}  "
                f"{row['example_s']:9.1f}  {row['force_rmse']:15.4f}  {row['energy_rmse']:20.3f}  "
                f"{row['model_calls']:>6d}/{row['model_steps']:<6d}        "
                f"{row['train64']:.3e}          {row['infer64']:.3e}        "
                f"{row['train64'] / row['infer64']:6.0f}              "
                f"{row['train512'] / row['infer512']:6.0f}")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if options.out:
        Path(options.out + ".txt").write_text(text)
        columns = ["precision", "reference_s", "training_s", "ratio", "example_s", "force_rmse",
                   "energy_rmse", "model_calls", "model_steps", "train64", "infer64", "train512",
                   "infer512"]
        tsv = "\t".join(columns) + "\n" + "".join(
            "\t".join(str(row[c]) for c in columns) + "\n" for row in rows)
        Path(options.out + ".tsv").write_text(tsv)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The device check of issue 19, inside LAMMPS: pair_style otf/kk and fix otf/train on a Kokkos
device against the plain CPU styles of the same run. Three parts, each writing its numbers to
--out (tab-separated) and printing a summary:

1. agreement.tsv   otf/kk under the Kokkos arguments (default `-k on g 1 -sf kk`: CUDA device 0,
                   where otf/kk evaluates the views as tensors on the GPU) against `pair_style otf`
                   on the CPU: energy, pressure tensor, per-atom energy and virial sums over 20 MD
                   steps and every force, per-atom energy and virial at step 20; float64 model
                   (target relative 1e-10) and float32 (1e-5).
2. training-<precision>.tsv   fix otf/train (LJ argon reference) in float32, bfloat16 and float16
                   with the model on the device and on the CPU: the training-loss history of both;
                   the loss must fall on the device and end within a factor 2 of the CPU run's.
3. speed.tsv       atom-steps per second of otf/kk on the device for Si crystals (default 4096 to
                   1,000,000 atoms) in float32 and bfloat16, next to the CPU style's at the sizes
                   the CPU can do in seconds (--cpu-cells), the device/CPU ratio, the device memory
                   per atom (slope of the peak `nvidia-smi` memory between the two largest sizes),
                   and the fix otf/train time per optimizer step on the device and on the CPU.

Dry run on a machine without a GPU: --kokkos "-k on t 1 -sf kk" --kk-options " resident yes" (the
host space, with the tensor evaluation that a CUDA space takes by itself; parts 1-3 run the same
steps, the device memory column reads nan). Needs only the Python standard library.

  bench/gpu/lammps_gpu_check.py --lmp LMP --plugin otfplugin.so --out DIR [--kokkos ARGS]
      [--cells 8,16,32,50] [--cpu-cells 8,16] [--cpu-threads 16]
"""
import argparse
import math
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "lammps"))
from lammps_harness import Context, run_lammps  # noqa: E402
from pair_otf_common import (ARGON_LJ_REFERENCE, argon_script, read_dump, relative_error,  # noqa: E402
                             write_argon_spec, write_spec)
from test_pair_otf_kokkos import COLUMNS, crystal  # noqa: E402

TOLERANCE = {"float64": 1e-10, "float32": 1e-5}


def write_tsv(path, header, rows):
    with open(path, "w") as out:
        out.write("\t".join(header) + "\n")
        for row in rows:
            out.write("\t".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row) + "\n")


def model_line(log):
    """The line in which otf/kk reports where its model runs and which evaluation path it takes."""
    return next((line.strip() for line in log.splitlines() if "model on " in line), "not reported")


def agreement(ctx, kokkos, kk_options, out):
    rows, ok = [], True
    for dtype in ("float64", "float32"):
        spec = write_spec(ctx, f"si-{dtype}.json", elements=("Si",), dtype=dtype, committee_size=2)
        cpu = run_lammps(ctx, crystal(ctx, spec, f"cpu-{dtype}.dump"), name=f"in.cpu-{dtype}")
        device = run_lammps(ctx, crystal(ctx, spec, f"kk-{dtype}.dump", options=kk_options), args=kokkos,
                            name=f"in.kk-{dtype}")
        thermo = max(relative_error([a[c] for c in COLUMNS], [b[c] for c in COLUMNS])
                     for a, b in zip(device.thermo[-1], cpu.thermo[-1]))
        cpu_atoms, _ = read_dump(ctx.workdir / f"cpu-{dtype}.dump")
        kk_atoms, _ = read_dump(ctx.workdir / f"kk-{dtype}.dump")
        per_atom = relative_error([v for i in sorted(kk_atoms) for v in kk_atoms[i]],
                                  [v for i in sorted(cpu_atoms) for v in cpu_atoms[i]])
        passed = sorted(kk_atoms) == sorted(cpu_atoms) and max(thermo, per_atom) <= TOLERANCE[dtype]
        ok &= passed
        rows.append((dtype, thermo, per_atom, TOLERANCE[dtype], "yes" if passed else "NO", model_line(device.log)))
        print(f"agreement {dtype}: thermo {thermo:.3g}, per atom {per_atom:.3g} (target {TOLERANCE[dtype]:g}) "
              f"[{model_line(device.log)}]")
    write_tsv(out / "agreement.tsv", ("model", "thermo_rel", "per_atom_rel", "target", "pass", "device"), rows)
    return ok


def training(ctx, kokkos, kk_options, out):
    ok = True
    spec = write_argon_spec(ctx)
    for precision in ("float32", "bfloat16", "float16"):
        fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 2 lr 3e-3 validation 0.3 "
               f"precision {precision}")
        runs = {}
        for label, args, options in (("cpu", [], ""), ("device", kokkos, kk_options)):
            text = argon_script(ctx, spec, fix=fix, steps=60, thermo=2)
            text = text.replace(f"pair_style otf {spec}\n", f"pair_style otf {spec}{options}\n")
            runs[label] = run_lammps(ctx, text, args=args, name=f"in.train-{precision}-{label}")
        cpu, device = runs["cpu"].thermo[-1], runs["device"].thermo[-1]
        steps = [r["Step"] for r in device]
        rows = [(int(s), c["f_t[1]"], d["f_t[1]"]) for s, c, d in zip(steps, cpu, device)]
        write_tsv(out / f"training-{precision}.tsv", ("step", "loss_cpu", "loss_device"), rows)
        trained = [r for r in rows if r[2] > 0]
        falls = len(trained) > 2 and trained[-1][2] < trained[0][2]
        close = bool(trained) and 0.5 <= trained[-1][2] / max(trained[-1][1], 1e-300) <= 2.0
        device_log = next((line.strip() for line in runs["device"].log.splitlines() if "device " in line
                           and "otf/train" in line), "device not logged")
        ok &= falls and close
        print(f"training {precision}: device loss {trained[0][2] if trained else math.nan:.4g} -> "
              f"{trained[-1][2] if trained else math.nan:.4g}, CPU -> {trained[-1][1] if trained else math.nan:.4g} "
              f"({'falls' if falls else 'does NOT fall'}, {'matches' if close else 'does NOT match'} the CPU trend) "
              f"[{device_log}]")
    return ok


class PeakGpuMemory:
    """Peak of nvidia-smi's used memory (MiB) of GPU 0 while the block runs; nan without nvidia-smi."""

    def __enter__(self):
        self.peak, self.stop = math.nan, False
        if shutil.which("nvidia-smi"):
            self.thread = threading.Thread(target=self.sample, daemon=True)
            self.thread.start()
        return self

    def sample(self):
        while not self.stop:
            out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout.strip()
            if out:
                value = float(out.splitlines()[0])
                self.peak = value if math.isnan(self.peak) else max(self.peak, value)
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.stop = True
        if hasattr(self, "thread"):
            self.thread.join()


def si_script(ctx, spec, cells, steps, precision, fix="", options=""):
    return (f"plugin load {ctx.plugin}\nunits metal\natom_style atomic\natom_modify map array\n"
            f"lattice diamond 5.431\nregion box block 0 {cells} 0 {cells} 0 {cells}\ncreate_box 1 box\n"
            f"create_atoms 1 box\nmass 1 28.0855\nvelocity all create 1000 7 loop geom\n"
            f"pair_style otf {spec} precision {precision}{options}\npair_coeff * * Si\nfix nve all nve\n{fix}"
            f"thermo {steps}\nrun {steps}\nrun {steps}\n")


def loop_time(log):
    times = [float(m) for m in re.findall(r"^Loop time of ([0-9.eE+-]+)", log, re.M)]
    return times[-1] if times else math.nan


def modify_time(log):
    """The Modify row of LAMMPS' last timing breakdown (the fixes' time, fix otf/train's included)."""
    rows = re.findall(r"^Modify\s*\|\s*[0-9.eE+-]+\s*\|\s*([0-9.eE+-]+)", log, re.M)
    return float(rows[-1]) if rows else math.nan


def speed(ctx, kokkos, kk_options, out, cells_list, cpu_cells, cpu_threads, atom_steps):
    spec = write_spec(ctx, "si-speed.json", elements=("Si",), dtype="float32",
                      hyperparameters={"hidden": [32, 32]})
    rows = []
    for precision in ("float32", "bfloat16"):
        memory = {}
        for cells in cells_list:
            atoms = 8 * cells ** 3
            steps = max(10, int(atom_steps / atoms))
            with PeakGpuMemory() as peak:
                device = run_lammps(ctx, si_script(ctx, spec, cells, steps, precision, options=kk_options), args=kokkos,
                                    name=f"in.speed-{precision}-{cells}", timeout=900)
            device_rate = atoms * steps / loop_time(device.log)
            memory[atoms] = peak.peak
            cpu_rate = math.nan
            if cells in cpu_cells:
                cpu_steps = max(5, int(2e5 / atoms))
                cpu = run_lammps(ctx, si_script(ctx, spec, cells, cpu_steps, precision),
                                 env={"OMP_NUM_THREADS": str(cpu_threads)}, name=f"in.speed-cpu-{precision}-{cells}")
                cpu_rate = atoms * cpu_steps / loop_time(cpu.log)
            rows.append([precision, atoms, device_rate, cpu_rate, device_rate / cpu_rate, peak.peak])
            print(f"speed {precision} {atoms} atoms: device {device_rate:.4g} atom-steps/s, CPU ({cpu_threads} "
                  f"threads) {cpu_rate:.4g}, ratio {device_rate / cpu_rate:.3g}, peak device memory {peak.peak} MiB")
        sizes = sorted(memory)
        per_atom = math.nan
        if len(sizes) >= 2:
            per_atom = (memory[sizes[-1]] - memory[sizes[-2]]) * 2 ** 20 / (sizes[-1] - sizes[-2])
        for row in rows:
            if row[0] == precision:
                row.append(per_atom)
        print(f"speed {precision}: device memory {per_atom:.4g} bytes per atom (slope of the two largest sizes)")
    write_tsv(out / "speed.tsv", ("precision", "atoms", "device_atom_steps_per_s", "cpu_atom_steps_per_s",
                                  "device/cpu", "peak_device_MiB", "device_bytes_per_atom"), rows)

    # The training step: fix otf/train labelling every step from Stillinger-Weber, timed by LAMMPS'
    # Modify row, per optimizer step, on the device and on the CPU (same input, 512 atoms).
    fix = 'fix train all otf/train reference "sw" coeff "* * Si.sw Si" every 1 drive reference\n'
    step_rows = []
    for label, args, env, options in (("device", kokkos, {}, kk_options),
                                      ("cpu", [], {"OMP_NUM_THREADS": str(cpu_threads)}, "")):
        run = run_lammps(ctx, si_script(ctx, spec, 4, 20, "float32", fix, options), args=args, env=env,
                         name=f"in.train-step-{label}")
        step_rows.append((label, modify_time(run.log) / 20 * 1e3))
    ratio = step_rows[1][1] / step_rows[0][1]
    write_tsv(out / "training-step.tsv", ("where", "ms_per_step_512_atoms"), step_rows + [("cpu/device", ratio)])
    print(f"training step, 512 atoms: device {step_rows[0][1]:.4g} ms, CPU {step_rows[1][1]:.4g} ms, "
          f"CPU/device {ratio:.3g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kokkos", default="-k on g 1 -sf kk")
    parser.add_argument("--kk-options", default="", help='appended to the otf/kk pair_style line, e.g. " resident yes"')
    parser.add_argument("--cells", default="8,16,32,50", help="Si diamond cells per side (8: 4096 atoms, 50: 1,000,000)")
    parser.add_argument("--cpu-cells", default="8,16")
    parser.add_argument("--cpu-threads", type=int, default=16)
    parser.add_argument("--atom-steps", type=float, default=2e7, help="atom-steps per measured device run")
    parser.add_argument("--parts", default="agreement,training,speed")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kokkos = args.kokkos.split()
    parts = args.parts.split(",")
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        ctx = Context(lmp=str(Path(args.lmp).resolve()), plugin=str(Path(args.plugin).resolve()), np=1, mpiexec="mpiexec", workdir=Path(folder),
                      source_dir=ROOT, lammps_has_kokkos=True)
        if "agreement" in parts:
            ok &= agreement(ctx, kokkos, args.kk_options, out)
        if "training" in parts:
            ok &= training(ctx, kokkos, args.kk_options, out)
        if "speed" in parts:
            speed(ctx, kokkos, args.kk_options, out, [int(c) for c in args.cells.split(",")],
                  [int(c) for c in args.cpu_cells.split(",")], args.cpu_threads, args.atom_steps)
    print("device check:", "PASSED" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

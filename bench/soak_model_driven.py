#!/usr/bin/env python3
"""Soak: a long model-driven run with periodic labels and saves (issue 18; not a CI test).

64-atom silicon learned from Stillinger-Weber with the main example's keywords for 3000 steps,
then --steps more steps in --segments segments with the model driving (drive auto keeps
checking the uncertainty every 100 steps and labels what is uncertain), the model saved every
segment and copied aside. While lmp runs, its resident memory (VmRSS) is sampled every second.
Reports the memory at the start and the end of the long phase and its slope per million steps,
and loads every saved copy in a fresh lmp (energy must be finite).

    bench/soak_model_driven.py --lmp ~/.cache/otf-torch/lammps-*/bin/lmp \
        --plugin build/plugins/otfplugin.so --steps 1000000 --out docs/soak-model-driven.txt
"""
import argparse
import math
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def rss_kib(pid):
    try:
        text = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(match.group(1)) if match else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="otf-soak-"))
    shutil.copy(ROOT / "examples" / "si-sw" / "si-spec-neural.json", work / "si-spec.json")
    segment = args.steps // args.segments
    lines = [f"plugin load {pathlib.Path(args.plugin).resolve()}", "units metal", "boundary p p p",
             "atom_modify map array", "lattice diamond 5.431", "region box block 0 2 0 2 0 2",
             "create_box 1 box", "create_atoms 1 box", "mass 1 28.0855",
             "velocity all create 2000.0 4928459 mom yes rot yes dist gaussian", "timestep 0.001",
             "pair_style otf si-spec.json", "pair_coeff * * Si",
             "fix md all nvt temp 1000.0 1000.0 0.1",
             'fix train all otf/train reference "sw" coeff "* * Si.sw Si" every 5 '
             "steps_per_frame 2 batch 4 lr 3e-3 buffer 400 seed 7 drive auto "
             f"thresholds 0.06 0.3 0.8 check_every 100 save soak.otf save_every {segment}",
             "thermo_style custom step temp pe f_train[3] f_train[9] f_train[11] f_train[13]",
             f"thermo {segment}", "run 3000", 'print "SOAK-START"']
    for k in range(args.segments):
        lines += [f"run {segment}", f"shell cp soak.otf soak-{k}.otf", f'print "SOAK-SEGMENT {k}"']
    (work / "in.soak").write_text("\n".join(lines) + "\n")

    started = time.time()
    process = subprocess.Popen([args.lmp, "-in", "in.soak", "-log", "log.soak"], cwd=work,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples, marks = [], {}
    import threading

    def sample():
        while process.poll() is None:
            value = rss_kib(process.pid)
            if value:
                samples.append((time.time() - started, value))
            time.sleep(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for line in process.stdout:
        if line.startswith("SOAK-"):
            marks[line.strip()] = (time.time() - started, rss_kib(process.pid))
    process.wait()
    sampler.join()
    if process.returncode != 0:
        print((work / "log.soak").read_text()[-3000:])
        sys.exit(f"lmp failed with {process.returncode}; scratch {work}")

    start_t, start_rss = marks["SOAK-START"]
    end_t, end_rss = marks[f"SOAK-SEGMENT {args.segments - 1}"]
    segment_rss = [marks[f"SOAK-SEGMENT {k}"][1] for k in range(args.segments)]
    slope = (segment_rss[-1] - segment_rss[0]) / max(1, (args.segments - 1) * segment) * 1e6
    loadable = []
    for k in range(args.segments):
        text = (f"plugin load {pathlib.Path(args.plugin).resolve()}\nunits metal\n"
                "lattice diamond 5.431\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\n"
                f"create_atoms 1 box\nmass 1 28.0855\npair_style otf soak-{k}.otf\n"
                "pair_coeff * * Si\nthermo_style custom step pe\nrun 0\n")
        (work / "in.load").write_text(text)
        result = subprocess.run([args.lmp, "-in", "in.load", "-log", "none"], cwd=work,
                                capture_output=True, text=True)
        energies = re.findall(r"^\s+0\s+(\S+)\s*$", result.stdout, re.MULTILINE)
        loadable.append(result.returncode == 0 and bool(energies) and math.isfinite(float(energies[-1])))
    log = (work / "log.soak").read_text()
    rows = [l for l in log.splitlines() if re.match(r"^\s+\d+\s+\S+", l)]
    report = [f"soak: {args.steps} model-phase steps in {args.segments} segments, 64-atom Si, "
              f"wall {end_t - start_t:.0f} s ({(end_t - start_t) / args.steps * 1e3:.3f} ms/step)",
              f"memory (VmRSS): {start_rss / 1024:.1f} MiB at the start of the long phase, "
              f"{end_rss / 1024:.1f} MiB at its end; per segment (MiB): "
              + " ".join(f"{v / 1024:.1f}" for v in segment_rss),
              f"memory slope over the segments: {slope / 1024:.2f} MiB per million steps",
              f"saved copies loadable with a finite energy: {sum(loadable)} of {len(loadable)}",
              "last thermo rows:"] + rows[-3:]
    print("\n".join(report))
    if args.out:
        pathlib.Path(args.out).write_text("\n".join(report) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if all(loadable) else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Atom-steps per second of pair_style otf (float32, bfloat16) against pair_style sw and
pair_style snap (Si_Zuo_JPCA2020: 2J=8, shipped with LAMMPS) on crystalline Si, measured in the
same run, 1 and 2 MPI ranks, 512 to 32768 atoms; neighbours per atom; peak memory per atom.

Every style runs the same NVE MD of a diamond crystal at 1000 K. Timing is LAMMPS' own "Loop
time" of a second run (the first warms up LibTorch and the neighbour lists). Ratios printed:
otf / snap at equal size and ranks (target >= 3 for float32 with 28 neighbours each), 2 ranks / 1
rank, per-atom cost relative to the smallest size. Memory: slope of the peak resident size of
serial runs between the two largest sizes, in bytes per atom (LAMMPS' own arrays included; the
model's weights are constant and drop out of the slope).

Styles otf-kk-<precision> run the same input under -k on -sf kk (pair_style otf/kk, Kokkos'
own fix nve/kk), for the Kokkos style's atom-steps per second next to the plain style's;
otf-kk-resident-<precision> adds `resident yes` (the tensor path GPU runs take) on the host.

Usage: bench_pair_otf.py --lmp LMP --plugin otfplugin.so [--cells 4,8,12,16] [--ranks 1,2]
                         [--styles sw,snap,otf-float32,otf-bfloat16,otf-kk-float32] [--out PREFIX]
Run with OMP_NUM_THREADS=1 (one LibTorch thread per rank).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# Atom-steps per measured run, per style, so that each run takes a few seconds.
ATOM_STEPS = {"sw": 2e6, "snap": 1.5e4, "otf-float32": 1.5e5, "otf-bfloat16": 5e4, "otf-float16": 1.5e5,
              "otf-kk-float32": 1.5e5, "otf-kk-bfloat16": 5e4, "otf-kk-resident-float32": 1.5e5}


def kokkos_args(style):
    """otf-kk-<precision>: the same input under -k on -sf kk (pair_style otf/kk, fix nve/kk)."""
    return ["-k", "on", "-sf", "kk"] if style.startswith("otf-kk-") else []


def pair_lines(style, work):
    if style == "sw":
        return "pair_style sw\npair_coeff * * Si.sw Si\n"
    if style == "snap":
        return ("pair_style snap\n"
                "pair_coeff * * Si_Zuo_JPCA2020.snapcoeff Si_Zuo_JPCA2020.snapparam Si\n")
    precision = style.split("-")[-1]
    resident = " resident yes" if "-resident-" in style else ""
    return (f"pair_style otf {work / 'si-model.json'} precision {precision}{resident}\n"
            "pair_coeff * * Si\n")


def script(style, cells, steps, plugin, work):
    load = f"plugin load {plugin}\n" if style.startswith("otf") else ""
    return f"""{load}units metal
atom_style atomic
lattice diamond 5.431
region box block 0 {cells} 0 {cells} 0 {cells}
create_box 1 box
create_atoms 1 box
mass 1 28.0855
{pair_lines(style, work)}
neighbor 1.0 bin
velocity all create 1000.0 4928459 loop geom
timestep 0.001
fix nve all nve
thermo 1000
run 2
run {steps}
"""


def run(lmp, text, ranks, work, name, extra_args=()):
    path = work / f"in.{name}"
    path.write_text(text)
    command = [lmp, "-in", str(path), "-log", str(work / f"log.{name}"), "-screen", "none",
               *extra_args]
    if ranks > 1:
        command = ["mpiexec", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)] + command
    else:
        command = ["/usr/bin/time", "-f", "maxrss_kb %M"] + command
    done = subprocess.run(command, cwd=work, capture_output=True, text=True)
    log = (work / f"log.{name}").read_text() if (work / f"log.{name}").exists() else ""
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stdout}\n{done.stderr}\n{log[-2000:]}")
    loops = re.findall(r"Loop time of ([\d.eE+-]+) on \d+ procs for (\d+) steps with (\d+) atoms", log)
    seconds, steps, atoms = float(loops[-1][0]), int(loops[-1][1]), int(loops[-1][2])
    neighs = re.findall(r"Ave neighs/atom = ([\d.eE+-]+)", log)
    rss = re.search(r"maxrss_kb (\d+)", done.stderr)
    return {"atoms": atoms, "steps": steps, "seconds": seconds,
            "atom_steps_per_s": atoms * steps / seconds,
            "list_neighbours": float(neighs[-1]) if neighs else float("nan"),
            "maxrss_kb": int(rss.group(1)) if rss else None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--cells", default="4,8,12,16")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--styles", default="sw,snap,otf-float32,otf-bfloat16")
    parser.add_argument("--cutoff", type=float, default=5.0, help="model cutoff (5.0: 28 neighbours, as SNAP's 4.9)")
    parser.add_argument("--out", help="prefix for .tsv and .txt results")
    args = parser.parse_args()
    cells = [int(c) for c in args.cells.split(",")]
    ranks_list = [int(r) for r in args.ranks.split(",")]
    styles = args.styles.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-pair-otf-"))
    (work / "si-model.json").write_text(json.dumps({"elements": ["Si"], "cutoff": args.cutoff}))

    results = {}
    for n in cells:
        for ranks in ranks_list:
            for style in styles:  # same size and ranks back to back: same machine state
                atoms = 8 * n ** 3
                steps = max(2, int(ATOM_STEPS.get(style, 1e5) / atoms))
                results[(style, n, ranks)] = run(args.lmp, script(style, n, steps, args.plugin, work),
                                                 ranks, work, f"{style}-{n}-{ranks}",
                                                 kokkos_args(style))
                r = results[(style, n, ranks)]
                print(f"# {style:13s} {r['atoms']:6d} atoms {ranks} rank(s): {r['atom_steps_per_s']:12.0f} "
                      f"atom-steps/s ({r['steps']} steps, {r['seconds']:.2f} s)", flush=True)

    lines = ["style\tatoms\tranks\tatom_steps_per_s\tlist_neighbours\tvs_snap\tvs_1_rank\tper_atom_cost_vs_smallest\tmaxrss_kb"]
    for (style, n, ranks), r in results.items():
        snap = results.get(("snap", n, ranks))
        one = results.get((style, n, 1))
        small = results.get((style, cells[0], ranks))
        lines.append("\t".join([
            style, str(r["atoms"]), str(ranks), f"{r['atom_steps_per_s']:.0f}", f"{r['list_neighbours']:.1f}",
            f"{r['atom_steps_per_s'] / snap['atom_steps_per_s']:.2f}" if snap else "-",
            f"{r['atom_steps_per_s'] / one['atom_steps_per_s']:.2f}" if one else "-",
            f"{small['atom_steps_per_s'] / r['atom_steps_per_s']:.2f}" if small else "-",
            str(r["maxrss_kb"] or "-")]))
    memory = []
    if len(cells) >= 2 and 1 in ranks_list:
        big, bigger = cells[-2], cells[-1]
        for style in styles:
            a, b = results[(style, big, 1)], results[(style, bigger, 1)]
            if a["maxrss_kb"] and b["maxrss_kb"]:
                slope = 1024.0 * (b["maxrss_kb"] - a["maxrss_kb"]) / (b["atoms"] - a["atoms"])
                memory.append(f"# peak memory per atom, {style}: {slope:.0f} bytes "
                              f"(slope {a['atoms']} -> {b['atoms']} atoms, serial)")
    for (style, n, ranks), r in results.items():
        plain_style = "otf-" + style.split("-")[-1]
        plain = results.get((plain_style, n, ranks))
        if style.startswith("otf-kk-") and plain:
            memory.append(f"# {style} / {plain_style} at {r['atoms']} atoms, "
                          f"{ranks} rank(s): {r['atom_steps_per_s'] / plain['atom_steps_per_s']:.2f}")
    neighbours = f"# model cutoff {args.cutoff} A; Si_Zuo_JPCA2020 SNAP cutoff 4.9 A (28 neighbours within the cutoff for both in diamond Si); list_neighbours is LAMMPS' Ave neighs/atom (with skin; full lists count both directions)"
    text = "\n".join([neighbours] + lines + memory) + "\n"
    print(text)
    if args.out:
        Path(args.out + ".tsv").write_text("\n".join(lines) + "\n")
        Path(args.out + ".txt").write_text(text)


if __name__ == "__main__":
    main()

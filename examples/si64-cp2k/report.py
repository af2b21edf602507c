#!/usr/bin/python3
"""Report of examples/si64-cp2k (Debian's /usr/bin/python3, standard library only): for the
training run and the warm-started run, the DFT calls, when the model drove, the wall time and what
the same MD would have cost as ab initio MD; for each model on the held-out DFT frames at 1000 K
and 600 K (configurations the trained model drove to, labelled by CP2K, never trained on), the force
RMSE per component (per element), the energy RMSE per atom and the largest force error. Exits 1
when a target of issue 34 is missed: at most 20 DFT calls, force RMSE <= 0.10 eV/A and energy RMSE
<= 2 meV/atom at 1000 K, the on-the-fly run at least 10x cheaper than ab initio MD, the warm start
reaching the same accuracy with fewer new calls.

usage: report.py [--folder DIR]
"""
import argparse
import csv
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tests" / "lammps"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ipi_common import read_journal  # noqa: E402  (the journal reader the tests use)
from heldout_report import read_dump  # noqa: E402  (the examples' dump reader)

FORCE_TARGET = 0.10     # eV/A per component, 1000 K
ENERGY_TARGET = 2.0     # meV/atom, 1000 K
MAX_CALLS = 20
MIN_SPEED_UP = 10.0
TAGS = {"train": "si64", "warm": "si64-warm"}  # the model dumps' names (in.si64-cp2k)


def read_model_dump(path):
    """{step: {id: (fx, fy, fz, pe)}} of a dump custom id type x y z fx fy fz c_peatom."""
    return read_dump(path, ("fx", "fy", "fz", "c_peatom"))


def compare(heldout, model):
    """Errors of the model's dump against the DFT frames, matched by step and atom id."""
    squared = {}
    largest, energy_sq, dft_sq = 0.0, 0.0, {}
    for frame in heldout:
        predicted = model[frame["step"]]
        energy = sum(row[3] for row in predicted.values())
        energy_sq += ((energy - frame["energy"]) / len(frame["ids"])) ** 2
        for atom, element, force in zip(frame["ids"], frame["species"], frame["forces"]):
            for a, b in zip(predicted[atom][:3], force):
                sums = squared.setdefault(element, [0.0, 0])
                sums[0] += (a - b) ** 2
                sums[1] += 1
                dft_sq[element] = dft_sq.get(element, 0.0) + b * b
                largest = max(largest, abs(a - b))
    per_element = {e: (math.sqrt(s / n), math.sqrt(dft_sq[e] / n)) for e, (s, n) in squared.items()}
    total = sum(s for s, _ in squared.values())
    count = sum(n for _, n in squared.values())
    return {
        "force_rmse": math.sqrt(total / count),
        "dft_rms_force": math.sqrt(sum(dft_sq.values()) / count),
        "per_element": per_element,
        "energy_rmse": 1000 * math.sqrt(energy_sq / len(heldout)),
        "largest": largest,
        "frames": len(heldout),
    }


def training_summary(folder, stage):
    path = folder / ("si64-dft.extxyz" if stage == "train" else "si64-dft-warm.extxyz")
    journal = read_journal(path) if path.exists() and path.stat().st_size > 0 else []
    with open(folder / f"learning-{stage}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    calls = int(rows[-1]["reference_calls"])
    seconds = float(rows[-1]["reference_seconds"])
    training = float(rows[-1]["training_seconds"])
    log = (folder / f"log-{stage}.lammps").read_text().splitlines()
    # The first run of the log is the on-the-fly training.
    loop = next(float(line.split()[3]) for line in log if line.startswith("Loop time"))
    steps = next(int(m.group(1)) for m in map(re.compile(r"^run\s+(\d+)\s*$").match, log) if m)
    wall = None
    wall_file = folder / f"wall-{stage}.txt"
    if wall_file.exists():
        wall = float(wall_file.read_text().split()[-1])
    return {"journal": len(journal), "calls": calls, "reference_seconds": seconds,
            "training_seconds": training, "loop": loop, "wall": wall, "rows": rows,
            "steps": steps}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", default=str(Path(__file__).resolve().parent))
    folder = Path(parser.parse_args().folder)
    failures = []

    def check(ok, text):
        print(("PASS  " if ok else "FAIL  ") + text)
        if not ok:
            failures.append(text)

    heldout = {t: read_journal(folder / f"heldout-{t}.extxyz") for t in ("1000K", "600K")}
    results = {}
    for stage in ("train", "warm"):
        if not (folder / f"learning-{stage}.csv").exists():
            continue
        s = training_summary(folder, stage)
        per_call = s["reference_seconds"] / max(s["calls"], 1)
        model_rows = [r for r in s["rows"] if r["event"] == "label"]
        print(f"== {stage}: {s['calls']} DFT calls ({s['journal']} in its journal) in {s['steps']} MD "
              f"steps at 1000 K; labels at steps {[int(r['step']) for r in model_rows]}")
        print(f"   one DFT call {per_call:.1f} s; training run {s['loop']:.0f} s wall "
              f"({s['reference_seconds']:.0f} s in CP2K, {s['training_seconds']:.1f} s learning)"
              + (f"; whole stage {s['wall']:.0f} s" if s["wall"] else ""))
        aimd = s["steps"] * per_call
        if s["calls"]:
            print(f"   the same {s['steps']} steps as ab initio MD (a call each): about {aimd:.0f} s, "
                  f"{aimd / s['loop']:.0f}x the on-the-fly run")
        results[stage] = {"summary": s, "aimd_ratio": aimd / s["loop"]}
        for t, frames in heldout.items():
            dump = folder / f"heldout-{t}-{TAGS[stage]}.dump"
            if not dump.exists():
                continue
            e = compare(frames, read_model_dump(dump))
            results[stage][t] = e
            elements = ", ".join(f"{el} {rmse:.4f} (RMS DFT force {rms:.3f}, {rmse / rms:.1%})"
                                 for el, (rmse, rms) in sorted(e["per_element"].items()))
            print(f"   held out {t} ({e['frames']} DFT frames): force RMSE {e['force_rmse']:.4f} eV/A "
                  f"per component ({e['force_rmse'] / e['dft_rms_force']:.1%} of {e['dft_rms_force']:.3f}); "
                  f"per element {elements}; energy RMSE {e['energy_rmse']:.2f} meV/atom; largest force "
                  f"error {e['largest']:.3f} eV/A")

    train = results.get("train")
    if train:
        check(train["summary"]["calls"] <= MAX_CALLS,
              f"training run: {train['summary']['calls']} DFT calls (at most {MAX_CALLS})")
        if "1000K" in train:
            e = train["1000K"]
            check(e["force_rmse"] <= FORCE_TARGET,
                  f"1000 K: force RMSE {e['force_rmse']:.4f} eV/A (<= {FORCE_TARGET})")
            check(e["energy_rmse"] <= ENERGY_TARGET,
                  f"1000 K: energy RMSE {e['energy_rmse']:.2f} meV/atom (<= {ENERGY_TARGET})")
        check(train["aimd_ratio"] >= MIN_SPEED_UP,
              f"on the fly {train['aimd_ratio']:.0f}x cheaper than ab initio MD (>= {MIN_SPEED_UP:.0f}x)")
    warm = results.get("warm")
    if train and warm and "1000K" in warm and "1000K" in train:
        check(warm["summary"]["calls"] < train["summary"]["calls"],
              f"warm start: {warm['summary']['calls']} new DFT calls (fewer than "
              f"{train['summary']['calls']})")
        check(warm["1000K"]["force_rmse"] <= FORCE_TARGET and
              warm["1000K"]["energy_rmse"] <= ENERGY_TARGET,
              f"warm start at 1000 K: force RMSE {warm['1000K']['force_rmse']:.4f} eV/A, energy "
              f"RMSE {warm['1000K']['energy_rmse']:.2f} meV/atom (the same targets)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

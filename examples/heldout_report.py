#!/usr/bin/python3
"""Accuracy and cost report of the examples with a reference behind i-PI (si-cp2k, cu-ase), run
by Debian's /usr/bin/python3 (standard library only).

Reads the LAMMPS log (the training run, then the held-out run), the reference labels of the
training run (--training journal), the held-out labels (--heldout journal: the reference on
configurations the trained model drove to, not trained on) and the model's forces at those steps
(--dump), and prints: reference calls and when the model took over, force RMSE (per component)
and energy RMSE (per atom) of the model against the reference on the held-out frames, the
measured time of one reference call, and what the same MD would have cost driven by the reference
alone (one call per step, as ab initio MD).

The reports of examples/si64-cp2k and examples/sic64-cp2k use its pieces (training_summary,
compare_with_frames, stage_results, TargetChecks).
"""
import argparse
import csv
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "lammps"))
from ipi_common import read_journal  # noqa: E402  (the journal reader the tests use)


def thermo_blocks(log_text):
    blocks, current, header = [], None, None
    for line in log_text.splitlines():
        words = line.split()
        if words and words[0] == "Step":
            header, current = words, []
            continue
        if current is not None:
            if line.startswith("Loop time"):
                blocks.append((header, current, float(line.split()[3])))
                current = None
            elif len(words) == len(header):
                try:
                    current.append({h: float(w) for h, w in zip(header, words)})
                except ValueError:
                    pass
    return blocks


def read_dump(path, wanted=("fx", "fy", "fz")):
    """{step: {id: (values of the wanted columns)}} of a dump custom with an id column (by
    default the forces of id type x y z fx fy fz)."""
    snapshots, lines, i = {}, Path(path).read_text().splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("ITEM: TIMESTEP"):
            step = int(lines[i + 1])
            count = int(lines[i + 3])
            columns = lines[i + 8].split()[2:]
            rows = {}
            for line in lines[i + 9:i + 9 + count]:
                values = dict(zip(columns, line.split()))
                rows[int(values["id"])] = tuple(float(values[k]) for k in wanted)
            snapshots[step] = rows
            i += 9 + count
        else:
            i += 1
    return snapshots


def compare_with_frames(heldout, model):
    """Errors of a model's dump ({step: {id: (fx, fy, fz, pe)}}) against labelled frames (a
    journal's), matched by step and atom id: force RMSE per component, overall and per element
    (with the element's RMS reference force), energy RMSE per atom (meV), largest component error."""
    squared, largest, energy_sq, reference_sq = {}, 0.0, 0.0, {}
    for frame in heldout:
        predicted = model[frame["step"]]
        energy = sum(row[3] for row in predicted.values())
        energy_sq += ((energy - frame["energy"]) / len(frame["ids"])) ** 2
        for atom, element, force in zip(frame["ids"], frame["species"], frame["forces"]):
            for a, b in zip(predicted[atom][:3], force):
                sums = squared.setdefault(element, [0.0, 0])
                sums[0] += (a - b) ** 2
                sums[1] += 1
                reference_sq[element] = reference_sq.get(element, 0.0) + b * b
                largest = max(largest, abs(a - b))
    per_element = {e: (math.sqrt(s / n), math.sqrt(reference_sq[e] / n))
                   for e, (s, n) in squared.items()}
    total = sum(s for s, _ in squared.values())
    count = sum(n for _, n in squared.values())
    return {
        "force_rmse": math.sqrt(total / count),
        "dft_rms_force": math.sqrt(sum(reference_sq.values()) / count),
        "per_element": per_element,
        "energy_rmse": 1000 * math.sqrt(energy_sq / len(heldout)),
        "largest": largest,
        "frames": len(heldout),
    }


def training_summary(folder, stage, journal_name, runs=1):
    """Calls, reference and learning seconds (the learning log of the stage), the journal's frames,
    and the MD steps and loop time of the stage's first `runs` runs (log-<stage>.lammps: the
    on-the-fly training, before the held-out rerun), and the stage's wall time (wall-<stage>.txt)."""
    path = folder / journal_name
    journal = read_journal(path) if path.exists() and path.stat().st_size > 0 else []
    with open(folder / f"learning-{stage}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    log = (folder / f"log-{stage}.lammps").read_text().splitlines()
    loops = [float(line.split()[3]) for line in log if line.startswith("Loop time")][:runs]
    steps = [int(m.group(1)) for m in map(re.compile(r"^run\s+(\d+)\s*$").match, log) if m][:runs]
    wall_file = folder / f"wall-{stage}.txt"
    wall = float(wall_file.read_text().split()[-1]) if wall_file.exists() else None
    return {"journal": len(journal), "calls": int(rows[-1]["reference_calls"]),
            "reference_seconds": float(rows[-1]["reference_seconds"]),
            "training_seconds": float(rows[-1]["training_seconds"]), "loop": sum(loops),
            "wall": wall, "rows": rows, "steps": sum(steps)}


def print_stage_cost(stage, summary, md_description):
    """Prints a training stage's calls, label steps, wall time and the cost of the same MD as ab
    initio MD (one call per step); returns that cost over the on-the-fly run's."""
    s = summary
    per_call = s["reference_seconds"] / max(s["calls"], 1)
    labels = [int(r["step"]) for r in s["rows"] if r["event"] == "label"]
    print(f"== {stage}: {s['calls']} DFT calls ({s['journal']} in its journal) in {s['steps']} MD "
          f"steps {md_description}; labels at steps {labels}")
    print(f"   one DFT call {per_call:.1f} s; training run {s['loop']:.0f} s wall "
          f"({s['reference_seconds']:.0f} s in CP2K, {s['training_seconds']:.1f} s learning)"
          + (f"; whole stage {s['wall']:.0f} s" if s["wall"] else ""))
    aimd = s["steps"] * per_call
    if s["calls"]:
        print(f"   the same {s['steps']} steps as ab initio MD (a call each): about {aimd:.0f} s, "
              f"{aimd / s['loop']:.0f}x the on-the-fly run")
    return aimd / s["loop"]


def print_heldout_errors(temperature, e):
    """Prints compare_with_frames' errors on the held-out frames of one temperature."""
    elements = ", ".join(f"{el} {rmse:.4f} (RMS DFT force {rms:.3f}, {rmse / rms:.1%})"
                         for el, (rmse, rms) in sorted(e["per_element"].items()))
    print(f"   held out {temperature} ({e['frames']} DFT frames): force RMSE {e['force_rmse']:.4f} eV/A "
          f"per component ({e['force_rmse'] / e['dft_rms_force']:.1%} of {e['dft_rms_force']:.3f}); "
          f"per element {elements}; energy RMSE {e['energy_rmse']:.2f} meV/atom; largest force "
          f"error {e['largest']:.3f} eV/A")


def stage_results(folder, heldout, stages, md_description, runs=1):
    """For each training stage with a learning log ({stage: (model dump tag, journal name)}): its
    cost (print_stage_cost) and its model's errors on each temperature's held-out frames
    ({temperature: frames}; the model's dump heldout-<temperature>-<tag>.dump), printed and
    returned as {stage: {"summary", "aimd_ratio", temperature: errors}}."""
    results = {}
    for stage, (tag, journal) in stages.items():
        if not (folder / f"learning-{stage}.csv").exists():
            continue
        s = training_summary(folder, stage, journal, runs)
        results[stage] = {"summary": s, "aimd_ratio": print_stage_cost(stage, s, md_description)}
        for temperature, frames in heldout.items():
            dump = folder / f"heldout-{temperature}-{tag}.dump"
            if not frames or not dump.exists():
                continue
            e = compare_with_frames(frames, read_dump(dump, ("fx", "fy", "fz", "c_peatom")))
            results[stage][temperature] = e
            print_heldout_errors(temperature, e)
    return results


class TargetChecks:
    """PASS/FAIL lines of a report's targets; `failed` says whether any was missed."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, text):
        print(("PASS  " if ok else "FAIL  ") + text)
        if not ok:
            self.failures.append(text)

    @property
    def failed(self):
        return bool(self.failures)


def report_folder(script):
    """The folder a report reads (--folder, default the report script's own)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", default=str(Path(script).resolve().parent))
    return Path(parser.parse_args().folder)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", default="log.lammps")
    parser.add_argument("--training", default="si-dft.extxyz")
    parser.add_argument("--heldout", default="si-dft-heldout.extxyz")
    parser.add_argument("--dump", default="heldout-model.dump")
    parser.add_argument("--fix", default="dft", help="ID of the training fix (thermo columns)")
    parser.add_argument("--reference", default="DFT", help="name of the reference in the report")
    parser.add_argument("--wall-seconds", type=float, default=None)
    options = parser.parse_args()
    log = Path(options.log).read_text()
    blocks = thermo_blocks(log)
    train_header, train_rows, train_loop = blocks[0]
    heldout_header, heldout_rows, heldout_loop = blocks[1]

    training = read_journal(options.training)
    heldout = read_journal(options.heldout)
    model_forces = read_dump(options.dump)
    model_energy = {int(r["Step"]): r["PotEng"] for r in heldout_rows}

    squared_force, force_count, squared_energy = 0.0, 0, 0.0
    atoms = len(heldout[0]["forces"])
    for frame in heldout:
        step = frame["step"]
        predicted = model_forces[step]
        for atom_id, force in zip(frame["ids"], frame["forces"]):
            for a, b in zip(predicted[atom_id], force):
                squared_force += (a - b) ** 2
                force_count += 1
        squared_energy += ((model_energy[step] - frame["energy"]) / atoms) ** 2
    force_rmse = math.sqrt(squared_force / force_count)
    energy_rmse = math.sqrt(squared_energy / len(heldout))
    dft_force_rms = math.sqrt(sum(x * x for f in heldout for row in f["forces"] for x in row)
                              / force_count)

    # The held-out run starts where the training run stopped (a budget may end it between thermo
    # rows).
    train_steps = int(heldout_rows[0]["Step"] - train_rows[0]["Step"])
    hand_over = re.search(r"step (\d+): the model drives", log)
    model_phase_calls = int(train_rows[-1][f"f_{options.fix}[14]"])
    ref = options.reference
    seconds_per_call = heldout_loop / len(heldout)
    print(f"{ref} calls while training: {len(training)} in {train_steps} MD steps "
          f"({model_phase_calls} of them while the model drove; model took over at step "
          f"{hand_over.group(1) if hand_over else 'never'})")
    print(f"held-out {ref} frames: {len(heldout)} configurations ({atoms} atoms) the trained model "
          f"drove to, not trained on")
    print(f"force RMSE vs {ref}: {force_rmse:.4f} eV/A per component "
          f"({ref} RMS force {dft_force_rms:.3f} eV/A, relative {force_rmse / dft_force_rms:.1%})")
    print(f"energy RMSE vs {ref}: {1000 * energy_rmse:.2f} meV/atom")
    print(f"one {ref} call: {seconds_per_call:.1f} s (held-out run: {heldout_loop:.0f} s for "
          f"{len(heldout)} calls)")
    print(f"training run: {train_loop:.0f} s wall; the same {train_steps} steps driven by {ref} "
          f"alone: {train_steps} calls, about {train_steps * seconds_per_call:.0f} s "
          f"({train_steps * seconds_per_call / train_loop:.1f}x the on-the-fly run)")
    if options.wall_seconds:
        print(f"whole example: {options.wall_seconds:.0f} s wall")


if __name__ == "__main__":
    main()

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
"""
import argparse
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

#!/usr/bin/env python3
"""OTF-Torch's training step and inference against the matched Python/PyTorch peer, same run.

For each size, runs build/bench/bench_training_step (our training step and pair_style otf's
inference, float32 / bfloat16 / float16, shared and per-member member work), which exports its
model, frames and float64 predictions; the peer (bench/training_peer.py) loads them, must agree
in float64 to 1e-10 (energies and every member's forces) before anything is timed, and is then
timed on the same frames in the same precisions. Prints and writes (--out PREFIX: .txt, .tsv):
  ours/inference   one optimizer step per atom in inference atom-steps (target <= 8)
  peer/ours step   the peer's step time over ours (target >= 2); the peer gets every member's
                   forces either by a backward pass per member or by one vectorised pass
                   (is_grads_batched), and is credited with the faster
  lower-precision speed-ups over float32, ours and the peer's (target >= 1.3 where it can pay).
With --mace HIDDEN[,HIDDEN...] it also times MACE's training step on the same frames
(bench/mace_training_step.py: a second, unmatched peer, one row per hidden-irreps setting).
A precision that the interpreter's torch cannot run on the CPU (float16 autocast and GradScaler
before PyTorch 2.x) is timed for ours only; the peer's columns then read nan.

Interpreter: the peer needs a torch of the same version as the LibTorch we build against:
bench/setup-peer.sh makes that virtual environment for PyPI's torch and prints its python, e.g.
  $(bench/setup-peer.sh) bench/bench_training_peer.py --bench build/bench/bench_training_step \
      --out docs/bench-training-step
and Debian 12's /usr/bin/python3 (python3-torch) is LibTorch 1.13's (a build against libtorch-dev).
"""
import argparse
import math
import sys
import tempfile
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_peer  # noqa: E402
from bench_common import cpu_description, parse_training_step, run_checked, write_report  # noqa: E402
import mace_training_step  # noqa: E402


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def peer_can_run(precision):
    """Whether this torch runs `precision` under CPU autocast (with a CPU GradScaler for float16):
    torch 1.13 has no CPU float16 autocast (it warns and stays in float32) and no CPU GradScaler."""
    lower = training_peer.autocast_dtype(precision)
    if lower is None:
        return True
    if lower == torch.float16 and not hasattr(torch.amp, "GradScaler"):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("cpu", dtype=lower):
            product = torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    return product.dtype == lower


def run_ours(bench, cells, frames, repeats, threads, precisions, folder):
    command = [bench, "--cells", str(cells), "--frames", str(frames), "--repeats", str(repeats),
               "--threads", str(threads), "--precisions", ",".join(precisions), "--export", folder]
    stdout = run_checked(command, threads)
    return parse_training_step(stdout), stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="build/bench/bench_training_step")
    parser.add_argument("--cells", default="2,4", help="diamond cells per side, comma-separated (2: 64 atoms, 4: 512)")
    parser.add_argument("--frames", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of [ours, peer]; medians over them")
    parser.add_argument("--precisions", default="float32,bfloat16,float16")
    parser.add_argument("--out", help="write PREFIX.txt and PREFIX.tsv")
    parser.add_argument("--mace", default="",
                        help="hidden irreps of MACE rows, comma-separated (e.g. 32x0e,64x0e+64x1o); needs mace-torch")
    parser.add_argument("--mace-repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true",
                        help="also profile the peer's inference and step per precision (largest size; PREFIX-profile.txt)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    precisions = args.precisions.split(",")
    peer_precisions = [p for p in precisions if peer_can_run(p)]
    mace_settings = [h for h in args.mace.split(",") if h]
    if mace_settings and not mace_training_step.available():
        sys.exit("--mace needs mace-torch in this interpreter: bench/setup-peer.sh 2.15.0 --with-mace")

    lines = [f"# CPU: {cpu_description()}",
             f"# PyTorch (peer) {torch.__version__}; {args.threads} thread(s); frames per batch {args.frames}; "
             f"the main example's model (committee 4, hidden [32, 32])"]
    if peer_precisions != precisions:
        lines.append(f"# this torch cannot run {', '.join(p for p in precisions if p not in peer_precisions)} "
                     "under CPU autocast: timed for ours only")
    header = ("atoms", "precision", "ours_inference_us", "peer_inference_us", "peer/ours_inference",
              "ours_step_us", "ours_generic_step_us", "peer_loop_step_us", "peer_batched_step_us",
              "peer/ours_step",
              "ours_step/inference", "ours_generic_step/inference", "ours_lower_speedup_inference",
              "ours_lower_speedup_step", "peer_lower_speedup_step")
    rows = []
    mace_rows = []
    for cells in [int(c) for c in args.cells.split(",")]:
        # Rounds of [ours, the peer], medians over the rounds: the machine's speed drifts.
        ours_rounds, peer_rounds = [], []
        for round_index in range(args.rounds):
            with tempfile.TemporaryDirectory() as folder:
                ours, _ = run_ours(args.bench, cells, args.frames, args.repeats, args.threads, precisions, folder)
                index, tensors = training_peer.load_export(folder)
            ours_rounds.append(ours)
            atoms = index["atoms"]
            if round_index == 0:
                agreement = training_peer.check_agreement(index, tensors)
                worst = max(agreement.values())
                lines.append(f"# {atoms} atoms: peer vs OTF-Torch in float64, largest relative difference "
                             + ", ".join(f"{k} {v:.1e}" for k, v in agreement.items()))
                if not worst < 1e-10:
                    sys.exit("\n".join(lines) + "\nthe peer does not compute the same model (target 1e-10): nothing timed")
            frames = training_peer.Frames(tensors, torch.float32)
            times = {}
            for precision in peer_precisions:
                peer = training_peer.Peer(index, tensors, torch.float32)
                times[("inference", precision)] = training_peer.time_inference(peer, frames, precision, args.repeats)
                peer = training_peer.Peer(index, tensors, torch.float32)
                times[("step_loop", precision)] = training_peer.time_step(peer, frames, precision, args.repeats, True)
                peer = training_peer.Peer(index, tensors, torch.float32)
                times[("step_batched", precision)] = training_peer.time_step(
                    peer, frames, precision, args.repeats, "batched")
            peer_rounds.append(times)
            if round_index == 0:
                for hidden in mace_settings:
                    step_us, parameters = mace_training_step.time_step(index, tensors, hidden, args.mace_repeats)
                    mace_rows.append((atoms, hidden, parameters, step_us))
        ours = {key: median([r[key] for r in ours_rounds]) for key in ours_rounds[0]}
        peer_times = {key: median([r[key] for r in peer_rounds]) for key in peer_rounds[0]}
        for precision in precisions:
            if precision not in peer_precisions:
                for what in ("inference", "step_loop", "step_batched"):
                    peer_times[(what, precision)] = math.nan
            # The peer is credited with the faster of its two ways to get every member's forces.
            peer_times[("step", precision)] = min(peer_times[("step_loop", precision)],
                                                  peer_times[("step_batched", precision)])
        for precision in precisions:
            oi, os_, og = ours[("inference", precision)], ours[("step", precision)], ours[("step_generic", precision)]
            pi, ps = peer_times[("inference", precision)], peer_times[("step", precision)]
            rows.append((atoms, precision, oi, pi, pi / oi, os_, og, peer_times[("step_loop", precision)],
                         peer_times[("step_batched", precision)], ps / os_, os_ / oi, og / oi,
                         ours[("inference", "float32")] / oi, ours[("step", "float32")] / os_,
                         peer_times[("step", "float32")] / ps))

    profiles = []
    if args.profile:
        for precision in peer_precisions:
            for what in ("inference", "step"):
                peer = training_peer.Peer(index, tensors, torch.float32)
                profiles.append(f"## peer {what}, {precision}, {atoms} atoms (self CPU time)\n"
                                + training_peer.profile(peer, frames, precision, what))
    widths = [max(len(h), 9) for h in header]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        cells = [str(row[0]), row[1]] + [f"{v:.2f}" for v in row[2:]]
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    lines.append("# targets: ours_step/inference <= 8; peer/ours_step >= 2; lower-precision speed-ups >= 1.3")
    if mace_rows:
        lines.append(f"# MACE (mace-torch {mace_training_step.version()}) on the same frame, one optimizer step: "
                     + mace_training_step.settings("<hidden>"))
        lines.append("    atoms  mace_hidden  parameters  mace_step_us  ours_float32_step_us  mace/ours_step")
        for atoms, hidden, parameters, step_us in mace_rows:
            ours_step = next(r[5] for r in rows if r[0] == atoms and r[1] == "float32")
            lines.append(f"{atoms:9d}  {hidden:>11}  {parameters:10d}  {step_us:12.1f}  {ours_step:20.2f}  "
                         f"{step_us / ours_step:14.1f}")
    tsv = ["\t".join(header)] + ["\t".join(str(v) if isinstance(v, (int, str)) else f"{v:.4f}" for v in row)
                                 for row in rows]
    write_report(args.out, "\n".join(lines), tsv)
    if args.out and profiles:
        Path(args.out + "-profile.txt").write_text("\n".join(profiles) + "\n")


if __name__ == "__main__":
    main()

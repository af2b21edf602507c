#!/usr/bin/python3
"""Plots docs/bench-training-step.tsv (bench/bench_training_peer.py): per size and precision, one
optimizer step per atom (ours with the members' shared work, ours per member, the matched
peer) and inference per atom-step (ours, the peer), microseconds.
Usage: plot_training_step.py RESULTS.tsv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(tsv_path, png_path):
    rows = list(csv.DictReader(open(tsv_path), delimiter="\t"))
    labels = [f"{r['atoms']} {r['precision']}" for r in rows]
    peer_step = [min(float(r["peer_loop_step_us"]), float(r["peer_batched_step_us"])) for r in rows]
    series_step = [("ours (shared)", [float(r["ours_step_us"]) for r in rows]),
                   ("ours (per member, before)", [float(r["ours_generic_step_us"]) for r in rows]),
                   ("PyTorch peer", peer_step)]
    series_inference = [("ours", [float(r["ours_inference_us"]) for r in rows]),
                        ("PyTorch peer", [float(r["peer_inference_us"]) for r in rows])]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, series, title in ((axes[0], series_step, "one optimizer step, us per atom of the batch"),
                              (axes[1], series_inference, "inference (energy + forces), us per atom-step")):
        width = 0.8 / len(series)
        for i, (name, values) in enumerate(series):
            bars = ax.bar([x + i * width for x in range(len(rows))], values, width, label=name)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(rows))])
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])

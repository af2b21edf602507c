#!/usr/bin/python3
"""Plots bench_si_training.py's TSV: the Si example's training-phase wall time per precision
against Stillinger-Weber MD of the same steps, and one training step per atom in inference
atom-steps. Usage: plot_si_training.py results.tsv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(tsv_path, png_path):
    rows = list(csv.DictReader(open(tsv_path), delimiter="\t"))
    names = [r["precision"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    left.bar(["SW MD only"] + names,
             [float(rows[0]["reference_s"])] + [float(r["training_s"]) for r in rows],
             color=["grey"] + ["tab:blue"] * len(rows))
    left.set_yscale("log")
    left.set_ylabel("wall time of 3000 steps (s)")
    left.set_title("Si example, training phase (64 atoms)")
    width = 0.38
    positions = range(len(rows))
    right.bar([p - width / 2 for p in positions],
              [float(r["train64"]) / float(r["infer64"]) for r in rows], width, label="64 atoms")
    right.bar([p + width / 2 for p in positions],
              [float(r["train512"]) / float(r["infer512"]) for r in rows], width, label="512 atoms")
    right.set_xticks(list(positions))
    right.set_xticklabels(names)
    right.set_ylabel("training step per atom / inference atom-step")
    right.set_title("cost of one optimizer step (batch of 1 frame)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:])

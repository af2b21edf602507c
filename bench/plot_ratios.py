#!/usr/bin/python3
"""Plots the ratio table a benchmark printed (columns: a group, a variant, ..., ratio as last
column) as grouped bars. Usage: plot_ratios.py RESULTS.txt OUT.png TITLE"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results_path, png_path, title):
    rows = []
    for line in open(results_path):
        words = line.split()
        if not words or line.startswith("#") or not words[-1].replace(".", "", 1).isdigit():
            continue
        rows.append((words[0], words[1], float(words[-1])))
    groups = list(dict.fromkeys(r[0] for r in rows))
    variants = list(dict.fromkeys(r[1] for r in rows))
    width = 0.8 / len(variants)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, variant in enumerate(variants):
        values = [next((r[2] for r in rows if r[0] == g and r[1] == variant), 0.0) for g in groups]
        bars = ax.bar([g + i * width for g in range(len(groups))], values, width, label=variant)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xticks([g + width * (len(variants) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"width {g}" for g in groups])
    ax.set_ylabel("speed relative to float32")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:4])

#!/usr/bin/python3
"""Plots bench_pair_otf.py's TSV: atom-steps per second against atoms, per style and rank count.
Usage: plot_pair_otf.py results.tsv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(tsv_path, png_path):
    rows = list(csv.DictReader(open(tsv_path), delimiter="\t"))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for style in dict.fromkeys(r["style"] for r in rows):
        for ranks, line in (("1", "-"), ("2", "--")):
            points = [(int(r["atoms"]), float(r["atom_steps_per_s"])) for r in rows
                      if r["style"] == style and r["ranks"] == ranks]
            if points:
                ax.plot(*zip(*points), line, marker="o", label=f"{style}, {ranks} rank(s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("atoms (crystalline Si)")
    ax.set_ylabel("atom-steps per second")
    ax.set_title("pair_style otf vs sw and snap (2J=8), 1 thread per rank")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

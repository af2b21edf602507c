#!/usr/bin/python3
"""Plots bench_model_evaluation's TSV files (--out): microseconds per atom-step against the atom
count, one line per precision and file. Flat lines mean cost linear in the atom count.
Usage: plot_model_evaluation.py OUT.png LABEL=results.tsv [LABEL=results.tsv ...]"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(png_path, inputs):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    styles = ["-", "--", ":"]
    for index, item in enumerate(inputs):
        label, path = item.split("=", 1)
        rows = list(csv.DictReader(open(path), delimiter="\t"))
        for precision in dict.fromkeys(r["precision"] for r in rows):
            points = [(int(r["atoms"]), float(r["us_per_atom_step"])) for r in rows if r["precision"] == precision]
            ax.plot([p[0] for p in points], [p[1] for p in points], styles[index % len(styles)], marker="o",
                    label=f"{precision}, {label}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("atoms (crystalline Si)")
    ax.set_ylabel("microseconds per atom-step (1 thread)")
    ax.set_title("Default potential: energy + forces + virial")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])

#!/usr/bin/python3
"""Plots of bench/bench_reference_calls.py: held-out force error against reference calls for both
policies, the calibration (predicted against actual force error of every label, each predicted
before it was learned), and the reference calls per segment of the heating run.

  /usr/bin/python3 bench/plot_reference_calls.py docs/bench-reference-calls docs/bench-reference-calls.png

Reads PREFIX.tsv, PREFIX-calibration.tsv and PREFIX-heating.tsv. Debian's /usr/bin/python3 with
python3-matplotlib.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def main():
    prefix, png = sys.argv[1], sys.argv[2]
    curve, calibration, heating = (rows(prefix + ".tsv"), rows(prefix + "-calibration.tsv"),
                                   rows(prefix + "-heating.tsv"))
    figure, (by_calls, calibrated, heated) = plt.subplots(1, 3, figsize=(15, 4.4))
    for policy, marker in (("accuracy", "o-"), ("thresholds", "s-")):
        points = [r for r in curve if r["policy"] == policy]
        by_calls.loglog([int(r["reference_calls"]) for r in points],
                        [float(r["force_rmse"]) for r in points], marker, ms=4,
                        label=f"drive auto {policy}")
    by_calls.axhline(0.06, color="k", lw=0.8, ls="--", label="0.06 eV/Å")
    by_calls.set_xlabel("reference calls so far")
    by_calls.set_ylabel("held-out force RMSE at 1000 K (eV/Å)")
    by_calls.set_title("error against reference calls (every 300 steps)")
    by_calls.legend(fontsize=8)
    by_calls.grid(alpha=0.3, which="both")

    for drive, marker in (("reference", "s"), ("model", "o")):
        points = [r for r in calibration if r["drive"] == drive]
        calibrated.loglog([float(r["predicted_force_error"]) for r in points],
                          [float(r["label_force_error"]) for r in points], marker, ms=4,
                          alpha=0.8, label=f"labels while the {drive} drove")
    values = [float(r[c]) for r in calibration
              for c in ("predicted_force_error", "label_force_error")]
    low, high = min(values) * 0.8, max(values) * 1.25
    calibrated.plot([low, high], [low, high], "k-", lw=0.8, label="actual = predicted")
    calibrated.set_xlabel("predicted force error before the label (eV/Å)")
    calibrated.set_ylabel("actual force error on the label (eV/Å)")
    calibrated.set_title("calibration (each label predicted, then compared)")
    calibrated.legend(fontsize=8)
    calibrated.grid(alpha=0.3, which="both")

    heated.bar([int(r["segment"]) for r in heating], [int(r["calls"]) for r in heating],
               color=["tab:red" if "->" in r["phase"] else "tab:orange" for r in heating])
    temperature = heated.twinx()
    temperature.plot([int(r["segment"]) for r in heating],
                     [float(r["mean_temperature"]) for r in heating], "k.-")
    temperature.set_ylabel("mean temperature (K)")
    heated.set_xlabel("segment of 300 steps (red: heating 1000 -> 1500 K; orange: 1500 K)")
    heated.set_ylabel("reference calls in the segment")
    heated.set_title("heating after training at 1000 K")
    figure.tight_layout()
    figure.savefig(png, dpi=110)


if __name__ == "__main__":
    main()

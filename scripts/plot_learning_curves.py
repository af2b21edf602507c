#!/usr/bin/python3
"""Learning curves of fix otf/train from its CSV learning log (keyword learning_log;
doc/fix_otf_train.md): validation force and energy errors and the committee's force uncertainty
against reference calls, and against MD step, with the steps the model drove shaded.

  /usr/bin/python3 scripts/plot_learning_curves.py learning.csv learning.png [--title TEXT]

Debian's /usr/bin/python3 with python3-matplotlib (the python3 first on PATH may lack it).
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise SystemExit(f"{path}: no rows (the fix writes one per label and per check)")
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("png")
    parser.add_argument("--title", default="")
    options = parser.parse_args()
    rows = read_rows(options.log)
    labels = [r for r in rows if r["event"] == "label" and float(r["force_rmse"]) > 0]
    figure, (by_calls, by_step) = plt.subplots(1, 2, figsize=(11, 4.2))
    calls = [int(r["reference_calls"]) for r in labels]
    by_calls.semilogy(calls, [float(r["force_rmse"]) for r in labels], "o-", ms=3,
                      label="validation force RMSE")
    by_calls.semilogy(calls, [1000 * float(r["energy_rmse_per_atom"]) for r in labels], "s-",
                      ms=3, label="validation energy RMSE (meV/atom)")
    # drive auto accuracy: the model's actual error on each label, measured before it was learned.
    measured = [r for r in labels if float(r.get("label_force_error", -1) or -1) >= 0]
    if measured:
        by_calls.semilogy([int(r["reference_calls"]) for r in measured],
                          [float(r["label_force_error"]) for r in measured], ".", ms=4,
                          label="force error on each new label (before learning it)")
    by_calls.set_xlabel("reference calls")
    by_calls.set_ylabel("error (force units; meV/atom)")
    by_calls.legend(fontsize=8)
    by_calls.grid(alpha=0.3)

    steps = [int(r["step"]) for r in rows]
    by_step.semilogy([int(r["step"]) for r in labels], [float(r["force_rmse"]) for r in labels],
                     "o-", ms=3, label="validation force RMSE")
    # The calibrated predicted error where the log has it (accuracy), else the raw uncertainty.
    column, name = (("predicted_force_error", "predicted force error")
                    if any(float(r.get("calibration_scale", 1) or 1) != 1 for r in rows)
                    else ("max_force_uncertainty", "max force uncertainty"))
    uncertain = [r for r in rows if float(r[column]) > 0]
    by_step.semilogy([int(r["step"]) for r in uncertain],
                     [float(r[column]) for r in uncertain], ".", ms=3, label=name)
    calls_axis = by_step.twinx()
    calls_axis.plot(steps, [int(r["reference_calls"]) for r in rows], "k-", lw=1,
                    label="reference calls")
    calls_axis.set_ylabel("reference calls")
    start = None
    for row in rows + [None]:
        model = row is not None and row["drive"] == "model"
        if model and start is None:
            start = int(row["step"])
        elif not model and start is not None:
            end = int(row["step"]) if row is not None else steps[-1]
            by_step.axvspan(start, end, color="tab:green", alpha=0.12, lw=0)
            start = None
    by_step.set_xlabel("MD step (shaded: the model drives)")
    by_step.legend(fontsize=8, loc="upper right")
    by_step.grid(alpha=0.3)
    figure.suptitle(options.title or options.log)
    figure.tight_layout()
    figure.savefig(options.png, dpi=120)


if __name__ == "__main__":
    main()

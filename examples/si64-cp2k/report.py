#!/usr/bin/python3
"""Report of examples/si64-cp2k (Debian's /usr/bin/python3, standard library only): for the
training run and the warm-started run, the DFT calls, when the model drove, the wall time and what
the same MD would have cost as ab initio MD; for each model on the held-out DFT frames at 1000 K
and 600 K (configurations the trained model drove to, labelled by CP2K, never trained on), the force
RMSE per component (per element), the energy RMSE per atom and the largest force error. Exits 1
when a target of issue 34 is missed: at most 20 DFT calls, force RMSE <= 0.10 eV/A and energy RMSE
<= 2 meV/atom at 1000 K, the on-the-fly run at least 10x cheaper than ab initio MD, the warm start
reaching the same accuracy with fewer new calls.

usage: report.py [--folder DIR]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tests" / "lammps"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ipi_common import read_journal  # noqa: E402  (the journal reader the tests use)
from heldout_report import TargetChecks, report_folder, stage_results  # noqa: E402

FORCE_TARGET = 0.10     # eV/A per component, 1000 K
ENERGY_TARGET = 2.0     # meV/atom, 1000 K
MAX_CALLS = 20
MIN_SPEED_UP = 10.0
# Each stage's model dump tag and label journal (in.si64-cp2k).
STAGES = {"train": ("si64", "si64-dft.extxyz"), "warm": ("si64-warm", "si64-dft-warm.extxyz")}


def main():
    folder = report_folder(__file__)
    check = TargetChecks()

    heldout = {t: read_journal(folder / f"heldout-{t}.extxyz") for t in ("1000K", "600K")}
    results = stage_results(folder, heldout, STAGES, "at 1000 K")

    train = results.get("train")
    if train:
        check(train["summary"]["calls"] <= MAX_CALLS,
              f"training run: {train['summary']['calls']} DFT calls (at most {MAX_CALLS})")
        if "1000K" in train:
            e = train["1000K"]
            check(e["force_rmse"] <= FORCE_TARGET,
                  f"1000 K: force RMSE {e['force_rmse']:.4f} eV/A (<= {FORCE_TARGET})")
            check(e["energy_rmse"] <= ENERGY_TARGET,
                  f"1000 K: energy RMSE {e['energy_rmse']:.2f} meV/atom (<= {ENERGY_TARGET})")
        check(train["aimd_ratio"] >= MIN_SPEED_UP,
              f"on the fly {train['aimd_ratio']:.0f}x cheaper than ab initio MD (>= {MIN_SPEED_UP:.0f}x)")
    warm = results.get("warm")
    if train and warm and "1000K" in warm and "1000K" in train:
        check(warm["summary"]["calls"] < train["summary"]["calls"],
              f"warm start: {warm['summary']['calls']} new DFT calls (fewer than "
              f"{train['summary']['calls']})")
        check(warm["1000K"]["force_rmse"] <= FORCE_TARGET and
              warm["1000K"]["energy_rmse"] <= ENERGY_TARGET,
              f"warm start at 1000 K: force RMSE {warm['1000K']['force_rmse']:.4f} eV/A, energy "
              f"RMSE {warm['1000K']['energy_rmse']:.2f} meV/atom (the same targets)")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())

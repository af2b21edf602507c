#!/usr/bin/python3
"""How far the example's DFT settings are from tighter ones (Debian's /usr/bin/python3, standard
library only): held-out configurations already labelled with the example's settings
(heldout-<T>.extxyz, label_heldout.py) are computed again with one setting made tighter, and the
differences of the forces (RMS and largest component) and of the energy per atom are printed:

  grid      1.5 x the plane-wave cutoff (relative cutoff 60) and EPS_SCF 1e-8 instead of 1e-6
  kpoints   a 2x2x2 Monkhorst-Pack mesh instead of the Gamma point
  basis     TZV2P-MOLOPT-GTH instead of DZVP-MOLOPT-SR-GTH

The example's settings are this example's (400 Ry, relative 50, Si and C) unless given, e.g. for
examples/si64-cp2k (200 Ry, relative 40, its held-out files):

  /usr/bin/python3 check_dft_settings.py heldout-1000K.dump heldout-1000K.extxyz --tighter grid
  /usr/bin/python3 check_dft_settings.py ../si64-cp2k/heldout-600K.dump \
      ../si64-cp2k/heldout-600K.extxyz --elements Si --cutoff 200 --rel-cutoff 40
"""
import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tests" / "lammps"))
from ipi_common import read_journal  # noqa: E402  (the journal reader the tests use)
from label_heldout import ELEMENTS, read_dump, single_point  # noqa: E402


def tighter_settings(which, elements, cutoff, rel_cutoff):
    """make_cp2k_input.py's options for the example's settings with one made tighter."""
    example = ["--elements", *elements, "--cutoff", f"{cutoff:g}", "--rel-cutoff", f"{rel_cutoff:g}"]
    return example + {"grid": ["--cutoff", f"{1.5 * cutoff:g}", "--rel-cutoff", "60",
                               "--eps-scf", "1e-8"],
                      "kpoints": ["--kpoints", "2"],
                      "basis": ["--basis", "TZV2P-MOLOPT-GTH"]}[which]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", help="configurations (dump custom id type x y z)")
    parser.add_argument("extxyz", help="their labels with the example's settings")
    parser.add_argument("--frames", type=int, default=1, help="configurations to check")
    parser.add_argument("--tighter", choices=("basis", "grid", "kpoints"), default="grid",
                        help="the setting made tighter (default: grid)")
    parser.add_argument("--elements", nargs="+", default=ELEMENTS,
                        help="element of each atom type (default: Si C)")
    parser.add_argument("--cutoff", type=float, default=400.0, help="the example's cutoff, Ry")
    parser.add_argument("--rel-cutoff", type=float, default=50.0,
                        help="the example's relative cutoff, Ry")
    args = parser.parse_args(argv)
    labelled = {frame["step"]: frame for frame in read_journal(args.extxyz)}
    checked = [(step, bounds, rows) for step, bounds, rows in read_dump(args.dump)
               if step in labelled][:args.frames]
    for step, bounds, rows in checked:
        tight = single_point(bounds, rows, tighter_settings(args.tighter, args.elements,
                                                             args.cutoff, args.rel_cutoff))
        example = labelled[step]
        differences = [a - b for fa, fb in zip(example["forces"], tight["forces_ev_a"])
                       for a, b in zip(fa, fb)]
        rms_force = math.sqrt(sum(f * f for row in tight["forces_ev_a"] for f in row) /
                              len(differences))
        print(f"{args.tighter}, step {step}: forces differ by {math.sqrt(sum(d * d for d in differences) / len(differences)):.5f}"
              f" eV/A RMS per component ({max(abs(d) for d in differences):.5f} largest) of an RMS "
              f"force of {rms_force:.3f} eV/A; energy by "
              f"{1000 * (example['energy'] - tight['energy_ev']) / len(rows):+.4f} meV/atom",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The cached LAMMPS build lists the packages OTF-Torch needs (lmp -h)."""
import subprocess

from lammps_harness import expect, main

REQUIRED = ["PLUGIN", "KOKKOS", "MANYBODY", "EXTRA-FIX", "ML-SNAP", "OPENMP"]


def test(ctx):
    help_text = subprocess.run([ctx.lmp, "-h"], capture_output=True, text=True, timeout=60).stdout
    installed = help_text.split("Installed packages:", 1)
    expect(len(installed) == 2, "lmp -h prints no 'Installed packages:' section")
    packages = installed[1].split("List of individual style options", 1)[0].split()
    missing = [p for p in REQUIRED if p not in packages]
    expect(not missing, f"lmp -h does not list {missing}; it lists {packages}")
    expect("29 Sep 2021" in help_text, "lmp -h does not report LAMMPS 29 Sep 2021")


if __name__ == "__main__":
    main(test)

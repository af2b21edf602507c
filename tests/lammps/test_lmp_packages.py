"""The cached LAMMPS build lists the packages OTF-Torch needs (lmp -h)."""
import subprocess

from lammps_harness import expect, main

REQUIRED = ["PLUGIN", "MANYBODY", "EXTRA-FIX", "ML-SNAP", "OPENMP"]


def test(ctx):
    help_text = subprocess.run([ctx.lmp, "-h"], capture_output=True, text=True, timeout=60).stdout
    installed = help_text.split("Installed packages:", 1)
    expect(len(installed) == 2, "lmp -h prints no 'Installed packages:' section")
    packages = installed[1].split("List of individual style options", 1)[0].split()
    required = REQUIRED + (["KOKKOS"] if ctx.lammps_has_kokkos else [])
    missing = [p for p in required if p not in packages]
    expect(not missing, f"lmp -h does not list {missing}; it lists {packages}")
    expect(bool(ctx.lammps_version) and ctx.lammps_version in help_text,
           f"lmp -h does not report LAMMPS {ctx.lammps_version}, the version the plugin is built for")


if __name__ == "__main__":
    main(test)

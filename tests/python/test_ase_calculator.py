#!/usr/bin/python3
"""The ASE calculator (otf_torch.OTFCalculator): forces and stress are the derivatives of its
energy (ASE's finite differences), per-atom energies sum to it, bad input gives errors that name
the problem; and on a Si model trained here by fix otf/train from Stillinger-Weber (1000 MD steps,
seconds), 1 ps of Langevin MD and a small phonon calculation (ase.phonons) run. Without --lmp (no
plugin built) the MD and phonon parts are skipped: an untrained model's MD is meaningless.

Usage: PYTHONPATH=<build>/python test_ase_calculator.py [--lmp LMP --plugin otfplugin.so]
(CTest sets both: tests/python/CMakeLists.txt)
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from ase import units
from ase.build import bulk
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.phonons import Phonons

import otf_torch
from otf_torch import OTFCalculator

SOURCE_DIR = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lammps"))
from lammps_harness import Context, run_lammps  # noqa: E402

SPEC = {"elements": ["Si", "C"], "cutoff": 4.0, "units": "metal", "committee_size": 4,
        "dtype": "float64", "seed": 7,
        "hyperparameters": {"hidden": [16, 16], "radial_functions": 6,
                            "angular_radial_functions": 3}}


def write_spec(folder, name, **changes):
    path = Path(folder) / name
    path.write_text(json.dumps({**SPEC, **changes}))
    return str(path)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_error(kind, words, function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except kind as error:
        text = str(error)
        for word in words:
            check(word in text, f"{kind.__name__} '{text}' does not mention {word!r}")
        print(f"  {kind.__name__}: {text}")
        return
    raise AssertionError(f"no {kind.__name__} (expected one mentioning {words})")


def check_derivatives(spec):
    atoms = bulk("Si", "diamond", a=5.43, cubic=True)
    atoms.symbols[[1, 6]] = "C"
    atoms.set_cell(atoms.cell[:] @ np.array([[1.0, 0.0, 0.0], [0.12, 1.0, 0.0],
                                             [-0.08, 0.1, 1.0]]), scale_atoms=True)
    atoms.rattle(0.08, seed=3)
    calc = OTFCalculator(spec)
    atoms.calc = calc
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()
    numerical = calc.calculate_numerical_forces(atoms, d=1e-5)
    force_error = np.abs(forces - numerical).max() / np.abs(forces).max()
    stress = atoms.get_stress()
    numerical_stress = calc.calculate_numerical_stress(atoms, d=1e-6)
    stress_error = np.abs(stress - numerical_stress).max() / np.abs(stress).max()
    energies = atoms.get_potential_energies()
    print(f"derivatives (float64, triclinic, Si+C): forces {force_error:.2g}, stress "
          f"{stress_error:.2g} relative to finite differences; sum of per-atom energies - energy "
          f"{energies.sum() - energy:.2g} eV")
    check(force_error < 1e-6, f"forces differ from -dE/dx by {force_error:.3g}")
    check(stress_error < 1e-6, f"stress differs from dE/de / V by {stress_error:.3g}")
    check(abs(energies.sum() - energy) < 1e-10 * abs(energy) + 1e-12, "per-atom energies")
    uncertainty = calc.results["force_uncertainty"]
    check(uncertainty.shape == (len(atoms),) and (uncertainty > 0).all(),
          "force_uncertainty missing or zero")
    check(calc.results["energy_uncertainty"].shape == (len(atoms),), "energy_uncertainty")


def train_silicon_model(lmp, plugin, folder):
    """The main example's on-the-fly training with its neural committee (examples/si-sw/in.si-sw-neural, part 1), 1000 steps."""
    ctx = Context(lmp, plugin, 1, "mpiexec", Path(folder), SOURCE_DIR / "tests" / "lammps")
    spec = SOURCE_DIR / "examples" / "si-sw" / "si-spec-neural.json"
    start = time.perf_counter()
    run_lammps(ctx, f"""plugin load {plugin}
units metal
atom_modify map array
lattice diamond 5.431
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 28.0855
velocity all create 2000.0 4928459 mom yes rot yes dist gaussian
timestep 0.001
pair_style otf {spec}
pair_coeff * * Si
fix md all nvt temp 1000.0 1000.0 0.1
fix train all otf/train reference "sw" coeff "* * Si.sw Si" every 5 steps_per_frame 2 batch 4 &
    lr 3e-3 buffer 400 validation 0.1 seed 7 drive auto accuracy 0.06 0.002 check_every 10 &
    label_steps 16 save si.otf journal labels.extxyz
run 1000
""", name="in.train")
    model = otf_torch.Model(Path(folder) / "si.otf")
    print(f"trained by fix otf/train in {time.perf_counter() - start:.1f} s: {model!r}")
    check(model.training["optimizer_steps"] > 0, "the model was not trained")
    labels = otf_torch.read_journal(Path(folder) / "labels.extxyz")
    forces = labels[-1].get_forces()
    print(f"label journal: {len(labels)} frames; last: energy "
          f"{labels[-1].get_potential_energy():.4f} eV, |F|max {np.abs(forces).max():.3f} eV/A")
    check(len(labels) >= 5 and forces.shape == (64, 3) and
          np.isfinite(forces).all(), "the label journal holds no usable frames")
    return str(model.path)


def run_langevin(spec):
    """1 ps of Langevin MD at 300 K (1000 steps of 1 fs), 64 atoms of Si."""
    atoms = bulk("Si", "diamond", a=5.43, cubic=True).repeat(2)
    atoms.calc = OTFCalculator(spec, force_uncertainty=False)
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(1))
    dynamics = Langevin(atoms, 1.0 * units.fs, temperature_K=300, friction=0.02,
                        rng=np.random.default_rng(2))
    start = time.perf_counter()
    dynamics.run(1000)
    seconds = time.perf_counter() - start
    temperature = atoms.get_temperature()
    print(f"Langevin MD: 1 ps (1000 steps) of 64 atoms in {seconds:.1f} s, final T "
          f"{temperature:.0f} K, E {atoms.get_potential_energy():.4f} eV")
    check(np.isfinite(atoms.positions).all() and 0 < temperature < 3000,
          f"MD went wrong: temperature {temperature}")


def run_phonons(spec, folder):
    """Phonons of the 2-atom Si cell in a 2x2x2 supercell: three acoustic modes vanish at Gamma."""
    atoms = bulk("Si", "diamond", a=5.43)
    phonons = Phonons(atoms, OTFCalculator(spec, force_uncertainty=False), supercell=(2, 2, 2),
                      delta=0.01, name=str(Path(folder) / "phonon"))
    phonons.run()
    phonons.read(acoustic=False)
    gamma = np.sort(np.abs(phonons.band_structure([[0, 0, 0]])[0]))  # eV
    zone_edge = phonons.band_structure([[0.5, 0.5, 0.5]])[0]
    print(f"phonons (2x2x2 supercell): |frequencies| at Gamma {np.round(gamma * 1000, 3)} meV, "
          f"at L {np.round(zone_edge * 1000, 2)} meV")
    check(gamma[:3].max() < 1e-2 * max(gamma.max(), 1e-3),  # float32 finite differences
          f"acoustic frequencies at Gamma are not ~0: {gamma}")
    check(np.isfinite(zone_edge).all(), "non-finite phonon frequencies")


def check_errors(folder, spec):
    print("errors:")
    atoms = bulk("Ge", "diamond", a=5.6)
    atoms.calc = OTFCalculator(spec)
    expect_error(ValueError, ["'Ge'", "Si, C"], atoms.get_potential_energy)
    expect_error(FileNotFoundError, ["missing.otf"], OTFCalculator, str(Path(folder) / "missing.otf"))
    expect_error(ValueError, ["real", "metal"], OTFCalculator,
                 write_spec(folder, "real.json", units="real"))
    slab = bulk("Si", "diamond", a=5.43, cubic=True)
    slab.pbc = (True, True, False)
    slab.calc = OTFCalculator(spec)
    expect_error(ValueError, ["pbc"], slab.get_potential_energy)
    expect_error(ValueError, ["float32 model"], otf_torch.Model, spec, precision="bf16")
    float32_spec = write_spec(folder, "float32.json", dtype="float32")
    expect_error(ValueError, ["half", "float32"], otf_torch.Model, float32_spec, precision="half")
    expect_error(ValueError, ["float64 model"], otf_torch.Model, float32_spec, precision="float64")
    garbage = Path(folder) / "garbage.otf"
    garbage.write_bytes(b"not a model at all")
    expect_error(RuntimeError, ["garbage.otf"], otf_torch.Model, str(garbage))
    model = otf_torch.Model(spec)
    expect_error(ValueError, ["shape"], model.evaluate, np.zeros((3, 2)), ["Si"] * 3)
    expect_error(ValueError, ["3 positions but 2"], model.evaluate, np.zeros((3, 3)), ["Si"] * 2)
    expect_error(ValueError, ["non-finite"], model.evaluate, np.full((1, 3), np.nan), ["Si"])
    expect_error(ValueError, ["degenerate"], model.evaluate, np.zeros((1, 3)), ["Si"],
                 np.zeros((3, 3)))


def check_metadata(spec):
    model = otf_torch.Model(spec)
    metadata = model.metadata
    print(f"metadata: {model!r}")
    check(metadata["elements"] == ["Si", "C"] and metadata["cutoff"] == 4.0 and
          metadata["units"] == "metal" and metadata["committee_size"] == 4 and
          metadata["training"]["optimizer_steps"] == 0 and
          metadata["spec"]["hyperparameters"]["hidden"] == [16, 16], f"metadata {metadata}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmp", help="the project's lmp (trains the model for MD and phonons)")
    parser.add_argument("--plugin", help="otfplugin.so")
    options = parser.parse_args()
    otf_torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="otf-ase-test-") as folder:
        spec = write_spec(folder, "spec.json")
        try:
            check_metadata(spec)
            check_derivatives(spec)
            check_errors(folder, spec)
            if options.lmp and options.plugin:
                silicon = train_silicon_model(os.path.abspath(options.lmp),
                                              os.path.abspath(options.plugin), folder)
                run_langevin(silicon)
                run_phonons(silicon, folder)
            else:
                print("SKIPPED: MD and phonons (no --lmp and --plugin to train a model with)")
        except AssertionError as failure:
            print(f"FAILED (test_ase_calculator): {failure}")
            sys.exit(1)
    print("PASSED (test_ase_calculator)")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

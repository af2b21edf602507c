#!/usr/bin/python3
"""An exact Stillinger-Weber calculator for ASE (numpy), LAMMPS' `pair_style sw` with its Si.sw
parameters: energy, forces, stress and per-atom energies, the reference of the main example
(examples/si-sw) for scripts/property_check.py. ASE has no SW calculator; ASE's LAMMPSlib needs
LAMMPS' Python module, which the project's LAMMPS build does not install.

E = sum_{i<j} phi2(r_ij) + sum_i sum_{j<k} phi3(r_ij, r_ik, theta_jik) (Stillinger and Weber,
Phys. Rev. B 31, 5262 (1985)), in LAMMPS' form (pair_sw.cpp, doc/src/pair_sw.rst):
  phi2 = A eps (B (sigma/r)^p - (sigma/r)^q) exp(sigma / (r - a sigma))
  phi3 = lambda eps (cos theta - cos theta0)^2 exp(gamma sigma / (r_ij - a sigma))
                                                  exp(gamma sigma / (r_ik - a sigma))
python3 stillinger_weber.py --lmp LMP compares it with lmp's pair_style sw (forces to 1e-8 eV/A).
"""
import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.neighborlist import neighbor_list

# LAMMPS' potentials/Si.sw (Stillinger-Weber's silicon), digit for digit.
SILICON = dict(epsilon=2.1683, sigma=2.0951, a=1.80, lambda_=21.0, gamma=1.20,
               costheta0=-0.333333333333, A=7.049556277, B=0.6022245584, p=4.0, q=0.0)


class StillingerWeber(Calculator):
    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies"]
    nolabel = True

    def __init__(self, parameters=None, **kwargs):
        super().__init__(**kwargs)
        self.sw = dict(SILICON if parameters is None else parameters)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        sw = self.sw
        eps, sigma, a = sw["epsilon"], sw["sigma"], sw["a"]
        cutoff = a * sigma
        atoms = self.atoms
        n = len(atoms)
        i, j, D = neighbor_list("ijD", atoms, cutoff)  # D = r_j - r_i (minimum image, any cell)
        r = np.linalg.norm(D, axis=1)
        energies = np.zeros(n)
        pair_gradients = np.zeros_like(D)  # dE / dD for every ordered pair

        # Two-body, each unordered pair counted once through a factor 1/2 on both orders.
        s_r = sigma / r
        expo = np.exp(sigma / (r - cutoff))
        radial = sw["B"] * s_r ** sw["p"] - s_r ** sw["q"]
        phi2 = sw["A"] * eps * radial * expo
        d_radial = (-sw["p"] * sw["B"] * s_r ** sw["p"] + sw["q"] * s_r ** sw["q"]) / r
        d_phi2 = sw["A"] * eps * (d_radial - radial * sigma / (r - cutoff) ** 2) * expo
        np.add.at(energies, i, 0.5 * phi2)
        pair_gradients += (0.5 * d_phi2 / r)[:, None] * D

        # Three-body: every pair of bonds (b1 < b2) around the same centre.
        e3 = np.exp(sw["gamma"] * sigma / (r - cutoff))
        de3 = -e3 * sw["gamma"] * sigma / (r - cutoff) ** 2
        starts = np.searchsorted(i, np.arange(n + 1))
        first, second = [], []
        for centre in range(n):
            bonds = np.arange(starts[centre], starts[centre + 1])
            upper = np.triu_indices(len(bonds), k=1)
            first.append(bonds[upper[0]])
            second.append(bonds[upper[1]])
        b1, b2 = np.concatenate(first), np.concatenate(second)
        u, v, r1, r2 = D[b1], D[b2], r[b1], r[b2]
        cos = np.einsum("ij,ij->i", u, v) / (r1 * r2)
        delta = cos - sw["costheta0"]
        strength = sw["lambda_"] * eps
        phi3 = strength * delta ** 2 * e3[b1] * e3[b2]
        # Per-atom energies as LAMMPS' ev_tally3 splits them: a third to each atom of the triplet.
        for atom in (i[b1], j[b1], j[b2]):
            np.add.at(energies, atom, phi3 / 3.0)
        d_cos_du = v / (r1 * r2)[:, None] - (cos / r1 ** 2)[:, None] * u
        d_cos_dv = u / (r1 * r2)[:, None] - (cos / r2 ** 2)[:, None] * v
        grad_u = (strength * 2 * delta * e3[b1] * e3[b2])[:, None] * d_cos_du + \
            (strength * delta ** 2 * e3[b2] * de3[b1] / r1)[:, None] * u
        grad_v = (strength * 2 * delta * e3[b1] * e3[b2])[:, None] * d_cos_dv + \
            (strength * delta ** 2 * e3[b1] * de3[b2] / r2)[:, None] * v
        np.add.at(pair_gradients, b1, grad_u)
        np.add.at(pair_gradients, b2, grad_v)

        store_pair_results(self.results, atoms, energies, i, j, D, pair_gradients)


def store_pair_results(results, atoms, energies, i, j, D, pair_gradients):
    """An ASE calculator's results from per-atom energies and the gradient g of the energy with
    respect to each pair vector D = r_j - r_i: F_j -= g, F_i += g; virial W = sum r f = -sum D (x) g."""
    forces = np.zeros((len(atoms), 3))
    np.add.at(forces, i, pair_gradients)
    np.add.at(forces, j, -pair_gradients)
    virial = -D.T @ pair_gradients
    results["energies"] = energies
    results["energy"] = results["free_energy"] = energies.sum()
    results["forces"] = forces
    if atoms.cell.rank == 3 and atoms.pbc.all():
        stress = -0.5 * (virial + virial.T) / atoms.get_volume()
        results["stress"] = stress.flat[[0, 4, 8, 5, 2, 1]]


def compare_with_lammps(lmp):
    """A jittered 64-atom diamond crystal in a triclinic box: this calculator against lmp's sw."""
    import os
    import subprocess
    import tempfile

    from ase.build import bulk
    from ase.io import write

    atoms = bulk("Si", "diamond", a=5.431, cubic=True).repeat(2)
    atoms.rattle(0.15, seed=4)
    atoms.set_cell(atoms.cell[:] + [[0, 0, 0], [0.6, 0, 0], [0.3, -0.4, 0]], scale_atoms=True)
    atoms.wrap()
    with tempfile.TemporaryDirectory() as folder:
        write(f"{folder}/si.data", atoms, format="lammps-data", atom_style="atomic")
        script = (f"units metal\natom_style atomic\natom_modify map array\nread_data si.data\n"
                  "mass 1 28.0855\npair_style sw\npair_coeff * * Si.sw Si\n"
                  "compute pe all pe/atom\n"
                  "dump d all custom 1 f.dump id x y z fx fy fz c_pe\n"
                  "dump_modify d sort id format float %.17g\nrun 0\n")
        open(f"{folder}/in.sw", "w").write(script)
        env = dict(os.environ)
        potentials = os.path.join(os.path.dirname(os.path.realpath(lmp)), "..", "share", "lammps",
                                  "potentials")
        env.setdefault("LAMMPS_POTENTIALS", potentials)
        subprocess.run([lmp, "-in", "in.sw", "-log", "none", "-screen", "none"], cwd=folder,
                       env=env, check=True)
        lines = open(f"{folder}/f.dump").read().splitlines()
        start = lines.index(next(line for line in lines if line.startswith("ITEM: ATOMS"))) + 1
        rows = np.array([[float(w) for w in line.split()] for line in lines[start:]])
    # The cell is already in LAMMPS' form (a along x, b in the xy plane): no rotation to undo.
    rotated = atoms.copy()
    rotated.positions = rows[:, 1:4]
    rotated.calc = StillingerWeber()
    forces = rotated.get_forces()
    force_error = np.abs(forces - rows[:, 4:7]).max()
    energy_error = np.abs(rotated.get_potential_energies() - rows[:, 7]).max()
    return force_error, energy_error


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lmp", required=True, help="an lmp with the MANYBODY package")
    force_error, energy_error = compare_with_lammps(parser.parse_args().lmp)
    print(f"numpy Stillinger-Weber vs lmp pair_style sw: max force difference {force_error:.2g} "
          f"eV/A, max per-atom energy difference {energy_error:.2g} eV")
    raise SystemExit(0 if force_error < 1e-8 and energy_error < 1e-8 else 1)

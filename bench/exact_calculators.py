#!/usr/bin/python3
"""Exact ASE calculators (numpy) of the two references of the FLARE peer benchmark
(bench/bench_flare_peer.py), so that FLARE's own OTF driver on ASE labels with the same potentials
as `fix otf/train`: Stillinger-Weber silicon (LAMMPS' Si.sw; the calculator of
scripts/stillinger_weber.py, imported) and Tersoff SiC (LAMMPS' SiC.tersoff, below). Energy, forces,
stress and per-atom energies.

    python3 bench/exact_calculators.py --check --lmp LMP

compares both with lmp's pair_style sw / tersoff on perturbed 64-atom cells (forces to 1e-8 eV/A).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.neighborlist import neighbor_list

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from stillinger_weber import StillingerWeber, store_pair_results  # noqa: E402  (SW re-exported)

DEFAULT_POTENTIALS = os.environ.get("LAMMPS_POTENTIALS", "/usr/share/lammps/potentials")

# Field order of a LAMMPS .tersoff entry (doc/src/pair_tersoff.rst).
TERSOFF_FIELDS = ("m", "gamma", "lambda3", "c", "d", "costheta0", "n", "beta", "lambda2", "B",
                  "R", "D", "lambda1", "A")


def read_tersoff(path):
    """{(e1, e2, e3): parameters} from a LAMMPS .tersoff file."""
    words = []
    for line in open(path):
        words += line.split("#", 1)[0].split()
    entries = {}
    for start in range(0, len(words), 17):
        key = tuple(words[start:start + 3])
        entries[key] = dict(zip(TERSOFF_FIELDS, map(float, words[start + 3:start + 17])))
    return entries


class Tersoff(Calculator):
    """LAMMPS' pair_style tersoff (pair_tersoff.cpp, default `shift 0`), term by term:

    E = 1/2 sum_i sum_{j!=i} fC(r_ij) [A exp(-lambda1 r_ij) - b_ij B exp(-lambda2 r_ij)]
    b_ij = (1 + (beta zeta_ij)^n)^(-1/2n)      (with LAMMPS' asymptotic branches, ters_bij)
    zeta_ij = sum_{k!=i,j} fC(r_ik) g(theta_ijk) exp((lambda3 (r_ij - r_ik))^m)   (m = 3 or 1)
    g = gamma (1 + c^2/d^2 - c^2 / (d^2 + (costheta0 - cos theta)^2))
    Two-body parameters (n, beta, lambda2, B, R, D, lambda1, A) from the entry (i, j, j); the
    three-body ones and the cutoff of r_ik from (i, j, k), as LAMMPS does.
    """
    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies"]
    nolabel = True

    def __init__(self, path=None, **kwargs):
        super().__init__(**kwargs)
        self.entries = read_tersoff(path or os.path.join(DEFAULT_POTENTIALS, "SiC.tersoff"))
        self.elements = sorted({key[0] for key in self.entries})
        ne = len(self.elements)
        table = lambda field: np.array(  # noqa: E731
            [[[self.entries[(a, b, c)][field] for c in self.elements] for b in self.elements]
             for a in self.elements])
        self.p = {field: table(field) for field in TERSOFF_FIELDS}
        # ters_bij's switch points, from the (i, j, j) entries (PairTersoff::setup_params).
        n = self.p["n"]
        with np.errstate(divide="ignore", invalid="ignore"):
            self.p["c1"] = np.power(2.0 * n * 1.0e-16, -1.0 / n)
            self.p["c2"] = np.power(2.0 * n * 1.0e-8, -1.0 / n)
            self.p["c3"] = 1.0 / self.p["c2"]
            self.p["c4"] = 1.0 / self.p["c1"]
        self.cutoff = float((self.p["R"] + self.p["D"]).max())
        self.ne = ne

    @staticmethod
    def _fc(r, R, D):
        """Cutoff function and its derivative (ters_fc, ters_fc_d)."""
        inner = r < R - D
        outer = r > R + D
        x = np.pi / 2 * (r - R) / D
        fc = np.where(inner, 1.0, np.where(outer, 0.0, 0.5 * (1.0 - np.sin(x))))
        dfc = np.where(inner | outer, 0.0, -(np.pi / 4 / D) * np.cos(x))
        return fc, dfc

    @staticmethod
    def _bij(zeta, beta, n, c1, c2, c3, c4):
        """b_ij and db/dzeta, with LAMMPS' branches (ters_bij, ters_bij_d)."""
        b = np.empty_like(zeta)
        db = np.empty_like(zeta)
        t = beta * zeta
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            cases = [
                (t > c1, lambda: 1.0 / np.sqrt(t), lambda: beta * -0.5 * t ** -1.5),
                (t > c2, lambda: (1.0 - t ** -n / (2.0 * n)) / np.sqrt(t),
                 lambda: beta * (-0.5 * t ** -1.5 * (1.0 - (1.0 + 1.0 / (2.0 * n)) * t ** -n))),
                (t < c4, lambda: np.ones_like(t), lambda: np.zeros_like(t)),
                (t < c3, lambda: 1.0 - t ** n / (2.0 * n), lambda: -0.5 * beta * t ** (n - 1.0)),
                (np.ones_like(t, dtype=bool), lambda: (1.0 + t ** n) ** (-1.0 / (2.0 * n)),
                 lambda: -0.5 * (1.0 + t ** n) ** (-1.0 - 1.0 / (2.0 * n)) * t ** n / zeta),
            ]
            done = np.zeros_like(t, dtype=bool)
            for mask, value, derivative in cases:
                take = mask & ~done
                if take.any():
                    b[take] = value()[take]
                    db[take] = derivative()[take]
                done |= take
        return b, db

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        atoms = self.atoms
        p = self.p
        n_atoms = len(atoms)
        index = {e: k for k, e in enumerate(self.elements)}
        species = np.array([index[s] for s in atoms.get_chemical_symbols()])
        i, j, D = neighbor_list("ijD", atoms, self.cutoff)  # D = r_j - r_i, sorted by i
        r = np.linalg.norm(D, axis=1)
        ti, tj = species[i], species[j]
        energies = np.zeros(n_atoms)
        gradients = np.zeros_like(D)  # dE/dD per ordered pair

        # Repulsion, half on each order of the pair (LAMMPS tallies it once per pair, entry ijj).
        Rij, Dij = p["R"][ti, tj, tj], p["D"][ti, tj, tj]
        fc, dfc = self._fc(r, Rij, Dij)
        A, l1 = p["A"][ti, tj, tj], p["lambda1"][ti, tj, tj]
        fr = A * np.exp(-l1 * r)
        rep = 0.5 * fc * fr
        d_rep = 0.5 * (dfc * fr - l1 * fc * fr)
        np.add.at(energies, i, 0.5 * rep)
        np.add.at(energies, j, 0.5 * rep)
        gradients += (d_rep / r)[:, None] * D

        # Every ordered pair of distinct bonds (p: i-j, q: i-k) around the same centre.
        starts = np.searchsorted(i, np.arange(n_atoms + 1))
        first, second = [], []
        for centre in range(n_atoms):
            bonds = np.arange(starts[centre], starts[centre + 1])
            a, b = np.meshgrid(bonds, bonds, indexing="ij")
            off = a != b
            first.append(a[off])
            second.append(b[off])
        bp, bq = np.concatenate(first), np.concatenate(second)
        ci, cj, ck = ti[bp], tj[bp], tj[bq]
        u, v, ru, rv = D[bp], D[bq], r[bp], r[bq]
        cos = np.einsum("ij,ij->i", u, v) / (ru * rv)
        fck, dfck = self._fc(rv, p["R"][ci, cj, ck], p["D"][ci, cj, ck])
        gamma, c, d, h = (p[f][ci, cj, ck] for f in ("gamma", "c", "d", "costheta0"))
        c2, d2, hc = c * c, d * d, h - cos
        g = gamma * (1.0 + c2 / d2 - c2 / (d2 + hc * hc))
        dg_dcos = -gamma * 2.0 * c2 * hc / (d2 + hc * hc) ** 2
        lam3, m = p["lambda3"][ci, cj, ck], p["m"][ci, cj, ck]
        x = lam3 * (ru - rv)
        arg = np.where(m == 3.0, x ** 3, x)
        darg = np.where(m == 3.0, 3.0 * x * x * lam3, lam3)  # d arg / d r_ij
        ex = np.where(arg > 69.0776, 1.0e30, np.where(arg < -69.0776, 0.0, np.exp(arg)))
        dex = np.where(np.abs(arg) > 69.0776, 0.0, ex * darg)
        zeta = np.zeros(len(r))
        np.add.at(zeta, bp, fck * g * ex)

        # Attraction b_ij fA(r_ij), half of it to the energy (E = 1/2 sum over ordered pairs).
        B, l2 = p["B"][ti, tj, tj], p["lambda2"][ti, tj, tj]
        fa = -B * np.exp(-l2 * r) * fc
        dfa = -B * np.exp(-l2 * r) * (dfc - l2 * fc)
        bij, dbij = self._bij(zeta, p["beta"][ti, tj, tj], p["n"][ti, tj, tj],
                              p["c1"][ti, tj, tj], p["c2"][ti, tj, tj], p["c3"][ti, tj, tj],
                              p["c4"][ti, tj, tj])
        att = 0.5 * bij * fa
        gradients += (0.5 * bij * dfa / r)[:, None] * D
        # Per-atom energies split each bond term half and half (not LAMMPS' split; only the sum
        # is checked and used).
        np.add.at(energies, i, 0.5 * att)
        np.add.at(energies, j, 0.5 * att)

        # Through zeta: dE/dzeta_ij = 1/2 fA db/dzeta.
        pref = (0.5 * fa * dbij)[bp]
        dcos_du = v / (ru * rv)[:, None] - (cos / ru ** 2)[:, None] * u
        dcos_dv = u / (ru * rv)[:, None] - (cos / rv ** 2)[:, None] * v
        grad_u = pref[:, None] * (fck * dg_dcos * ex)[:, None] * dcos_du + \
            (pref * fck * g * dex / ru)[:, None] * u
        grad_v = pref[:, None] * (fck * dg_dcos * ex)[:, None] * dcos_dv + \
            (pref * (dfck * g * ex - fck * g * dex) / rv)[:, None] * v
        np.add.at(gradients, bp, grad_u)
        np.add.at(gradients, bq, grad_v)

        store_pair_results(self.results, atoms, energies, i, j, D, gradients)


def lammps_reference(lmp, atoms, pair_style, pair_coeff, specorder):
    """Energy, forces (dump order = atoms order) and pressure tensor of lmp on `atoms`, whose cell
    must already be in LAMMPS' form (a along x, b in the xy plane)."""
    from ase.io import write
    with tempfile.TemporaryDirectory() as folder:
        write(f"{folder}/in.data", atoms, format="lammps-data", atom_style="atomic",
              specorder=specorder)
        masses = "".join(f"mass {k + 1} 1.0\n" for k in range(len(specorder)))
        script = (f"units metal\natom_style atomic\natom_modify map array\nread_data in.data\n"
                  f"{masses}pair_style {pair_style}\npair_coeff {pair_coeff}\n"
                  "thermo_style custom step pe pxx pyy pzz pyz pxz pxy\n"
                  "thermo_modify format float %.17g\n"
                  "variable e equal pe\nvariable pxx equal pxx\nvariable pyy equal pyy\n"
                  "variable pzz equal pzz\nvariable pyz equal pyz\nvariable pxz equal pxz\n"
                  "variable pxy equal pxy\n"
                  "dump d all custom 1 f.dump id fx fy fz\n"
                  "dump_modify d sort id format float %.17g\nrun 0\n"
                  "print \"RESULT ${e} ${pxx} ${pyy} ${pzz} ${pyz} ${pxz} ${pxy}\" file result.txt\n")
        open(f"{folder}/in.lmp", "w").write(script)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        subprocess.run([lmp, "-in", "in.lmp", "-log", "none", "-screen", "none"], cwd=folder,
                       env=env, check=True)
        lines = open(f"{folder}/f.dump").read().splitlines()
        start = lines.index(next(line for line in lines if line.startswith("ITEM: ATOMS"))) + 1
        forces = np.array([[float(w) for w in line.split()[1:]] for line in lines[start:]])
        values = [float(w) for w in open(f"{folder}/result.txt").read().split()[1:]]
    # LAMMPS' pressure (metal: bar) is minus ASE's stress (eV/A^3); Voigt order xx yy zz yz xz xy.
    # 1.6021765e6 bar per eV/A^3 is LAMMPS' own nktv2p for metal units (update.cpp).
    stress = -np.array(values[1:]) / 1.6021765e6
    return values[0], forces, stress


def perturbed_cells(symbols, a, count, seed):
    """`count` 64-atom diamond/zincblende cells, rattled and sheared into triclinic LAMMPS form."""
    from ase.build import bulk
    rng = np.random.default_rng(seed)
    cells = []
    for k in range(count):
        atoms = (bulk("SiC", "zincblende", a=a, cubic=True) if symbols == "SiC"
                 else bulk("Si", "diamond", a=a, cubic=True)).repeat(2)
        atoms.positions += rng.normal(0.0, 0.08 + 0.04 * k, atoms.positions.shape)
        tilt = rng.uniform(-0.4, 0.4, 3) * (k > 0)
        cell = atoms.cell[:] * (1.0 + rng.uniform(-0.02, 0.02))
        cell[1, 0] += tilt[0]
        cell[2, 0] += tilt[1]
        cell[2, 1] += tilt[2]
        atoms.set_cell(cell, scale_atoms=True)
        atoms.wrap()
        cells.append(atoms)
    return cells


def check(lmp, count=4):
    """Max differences of both calculators from lmp; True when all within 1e-8 (eV/A, eV)."""
    cases = [("Si", 5.431, StillingerWeber(), "sw", f"* * {DEFAULT_POTENTIALS}/Si.sw Si", ["Si"]),
             ("SiC", 4.3596, Tersoff(), "tersoff",
              f"* * {DEFAULT_POTENTIALS}/SiC.tersoff Si C", ["Si", "C"])]
    ok = True
    for symbols, a, calc, style, coeff, order in cases:
        worst_f = worst_e = worst_s = 0.0
        for atoms in perturbed_cells(symbols, a, count, seed=11):
            energy, forces, stress = lammps_reference(lmp, atoms, style, coeff, order)
            atoms.calc = calc
            worst_f = max(worst_f, np.abs(atoms.get_forces() - forces).max())
            worst_e = max(worst_e, abs(atoms.get_potential_energy() - energy) / len(atoms))
            worst_s = max(worst_s, np.abs(atoms.get_stress() - stress).max())
            rms_force = np.sqrt(np.mean(forces ** 2))
        passed = worst_f < 1e-8 and worst_e < 1e-8 and worst_s < 1e-8
        ok &= passed
        print(f"{type(calc).__name__:16s} vs lmp pair_style {style:8s} on {count} perturbed 64-atom "
              f"{symbols} cells (last RMS force {rms_force:.2f} eV/A): max |dF| {worst_f:.1e} eV/A, "
              f"max |dE|/atom {worst_e:.1e} eV, max |d stress| {worst_s:.1e} eV/A^3 "
              f"{'ok' if passed else 'FAILED'}")
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare both with lmp")
    parser.add_argument("--lmp", help="an lmp with the MANYBODY package")
    parser.add_argument("--cells", type=int, default=4)
    args = parser.parse_args()
    if not args.check or not args.lmp:
        parser.error("use --check --lmp LMP")
    raise SystemExit(0 if check(args.lmp, args.cells) else 1)

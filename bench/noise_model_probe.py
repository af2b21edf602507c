#!/usr/bin/python3
"""Would a per-atom noise model rank a linear model's errors where its posterior does not?
(issue 39, docs/bayesian-learner.md). Offline probe for Debian's /usr/bin/python3 with the build's
otf_torch on PYTHONPATH: fits, per element, a ridge regression of each labelled atom's squared
force residual (the model file against the label journal it was trained on, in-sample) on a
radial histogram of its neighbours per element (0.1 A bins from 1.5 A to the model's cutoff),
then compares on held-out LAMMPS dumps the Spearman rank correlation of the per-atom error with
the committee's spread and with the fitted noise. No held-out data enters the fit.

usage: noise_model_probe.py MODEL JOURNAL DUMP [DUMP ...] --elements Si C [--ridge 1.0]"""
import argparse

import numpy as np

import otf_torch
from heldout_errors import read_dump, spearman


def neighbour_histograms(positions, species, cell, cutoff, n_species, edges):
    heights = np.abs(np.linalg.det(cell)) / np.linalg.norm(np.cross(cell[[1, 2, 0]], cell[[2, 0, 1]]), axis=1)
    if heights.min() < 2 * cutoff:
        raise SystemExit(f"a cell {heights.min():.2f} A wide: the nearest-image histogram needs at least 2 x the cutoff")
    delta = positions[:, None, :] - positions[None, :, :]
    fractional = delta @ np.linalg.inv(cell)
    fractional -= np.round(fractional)  # nearest image: the cells here are at least 2 cutoffs wide
    distances = np.linalg.norm(fractional @ cell, axis=2)
    rows = []
    for i in range(len(positions)):
        row = []
        for s in range(n_species):
            near = (species == s) & (distances[i] > 1e-6) & (distances[i] < cutoff)
            row.extend(np.histogram(distances[i][near], bins=edges)[0])
        rows.append(row)
    return np.asarray(rows, float)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("journal")
    parser.add_argument("dumps", nargs="+")
    parser.add_argument("--elements", nargs="+", required=True)
    parser.add_argument("--ridge", type=float, default=1.0)
    options = parser.parse_args()
    model = otf_torch.Model(options.model)
    elements = options.elements
    edges = np.arange(1.5, model.cutoff + 0.05, 0.1)
    features, residuals, species_all = [], [], []
    for atoms in otf_torch.read_journal(options.journal):
        if np.abs(atoms.get_forces()).max() < 1e-6:
            continue  # a perfect lattice: nothing to learn about forces
        symbols = atoms.get_chemical_symbols()
        species = np.array([elements.index(s) for s in symbols])
        cell = np.array(atoms.cell)
        out = model.evaluate(atoms.positions, symbols, cell)
        residuals.append(np.sum((np.asarray(out["forces"]) - atoms.get_forces()) ** 2, axis=1))
        features.append(neighbour_histograms(atoms.positions, species, cell, model.cutoff,
                                             len(elements), edges))
        species_all.append(species)
    features, residuals = np.vstack(features), np.concatenate(residuals)
    species_all = np.concatenate(species_all)
    weights = {}
    for s in range(len(elements)):
        rows = species_all == s
        design = np.hstack([np.ones((rows.sum(), 1)), features[rows]])
        weights[s] = np.linalg.solve(design.T @ design + options.ridge * np.eye(design.shape[1]),
                                     design.T @ residuals[rows])
    print(f"{len(residuals)} labelled atoms, {features.shape[1]} features per atom")
    for path in options.dumps:
        errors, spreads, noises = [], [], []
        for frame in read_dump(path):
            species = frame["types"] - 1
            positions = frame["positions"] - frame["origin"]
            out = model.evaluate(positions, [elements[s] for s in species], frame["cell"],
                                 force_uncertainty=True)
            errors.extend(np.linalg.norm(np.asarray(out["forces"]) - frame["forces"], axis=1))
            spreads.extend(out["force_uncertainties"])
            histograms = neighbour_histograms(positions, species, frame["cell"], model.cutoff,
                                              len(elements), edges)
            noises.extend(max(weights[s] @ np.concatenate([[1.0], h]), 0.0)
                          for s, h in zip(species, histograms))
        print(f"{path}: Spearman of the per-atom error with the committee spread "
              f"{spearman(spreads, errors):.2f}, with the fitted noise {spearman(noises, errors):.2f}")


if __name__ == "__main__":
    main()

"""OTF-Torch's trained models outside LAMMPS.

`Model` loads a model file written by `fix otf/train` (or a JSON spec: a fresh untrained model)
and evaluates it with the same C++ that `pair_style otf` runs: energy, forces, virial, per-atom
energies and the committee's uncertainties. `OTFCalculator` (otf_torch.ase_calculator) is an ASE
calculator on it; `read_journal` reads the label journals (extxyz) the fix writes.
See docs/python-module.md.
"""
import json
import os

import numpy as np

from . import _otf_torch
from ._otf_torch import get_num_threads, set_num_threads

__version__ = _otf_torch.__version__
torch_version = _otf_torch.torch_version

__all__ = ["Model", "read_journal", "OTFCalculator", "set_num_threads", "get_num_threads"]


class Model:
    """A model file or spec, loaded for evaluation.

    precision: None (the model's own: float64 or float32), or for a float32 model one of
    "float32", "bfloat16", "float16" (aliases fp32, bf16, fp16, "torch.float16", ...).
    """

    def __init__(self, path, precision=None, chunk_size=2048):
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"OTF-Torch model file '{path}' does not exist")
        if os.path.isdir(path):
            raise IsADirectoryError(f"OTF-Torch model file '{path}' is a folder")
        self.path = path
        self._model = _otf_torch.Model(path, precision, int(chunk_size))

    # --- what the model is -------------------------------------------------------------------
    elements = property(lambda self: list(self._model.elements), doc="chemical symbols")
    cutoff = property(lambda self: self._model.cutoff, doc="in the model's length unit")
    units = property(lambda self: self._model.units, doc="a LAMMPS unit style: metal = eV, Angstrom")
    committee_size = property(lambda self: self._model.committee_size)
    dtype = property(lambda self: self._model.dtype, doc="parameter dtype: float32 or float64")
    architecture = property(lambda self: self._model.architecture)
    precision = property(lambda self: self._model.precision, doc="the precision evaluations use")

    @property
    def spec(self):
        """The model's spec: every hyperparameter (the JSON a fresh model is made from)."""
        return json.loads(self._model.spec_json())

    @property
    def training(self):
        """Training history: optimizer_steps, frames_seen, precision ("" when untrained)."""
        return json.loads(self._model.training_json())

    @property
    def metadata(self):
        """Everything a user asks of a model file, in one dict."""
        return {"path": self.path, "architecture": self.architecture, "elements": self.elements,
                "cutoff": self.cutoff, "units": self.units,
                "committee_size": self.committee_size, "dtype": self.dtype,
                "precision": self.precision, "energy_shifts_fitted": self._model.energy_shifts_fitted,
                "spec": self.spec, "training": self.training,
                "otf_torch_version": __version__}

    def save(self, path):
        """Writes the model file (atomically: a temporary file renamed over `path`)."""
        self._model.save(os.fspath(path))

    # --- evaluation ------------------------------------------------------------------------
    def evaluate(self, positions, symbols, cell=None, force_uncertainty=False):
        """Evaluates one configuration, in the model's units.

        positions: (atoms, 3); symbols: one element symbol per atom; cell: None (no periodicity)
        or the 3 x 3 rows a, b, c of a cell periodic in all three directions.
        Returns a dict: energy, forces (atoms, 3), virial (6: xx yy zz xy xz yz, sum r f),
        energies (atoms), atom_virials (atoms, 6), energy_uncertainties (atoms: the committee's
        spread of each atomic energy), and with force_uncertainty=True force_uncertainties
        (atoms: sqrt(mean over members of |F_k - mean F|^2), one backward pass per member).
        """
        symbols = [str(s) for s in symbols]
        cell_array = None if cell is None else np.asarray(cell, dtype=np.float64)
        return self._model.evaluate(np.asarray(positions, dtype=np.float64), symbols,
                                    cell_array, bool(force_uncertainty))

    def __repr__(self):
        training = self.training
        return (f"otf_torch.Model('{self.path}': {self.architecture}, elements "
                f"{'/'.join(self.elements)}, cutoff {self.cutoff}, units {self.units}, "
                f"{self.committee_size} members, {self.dtype}, evaluated in {self.precision}, "
                f"{training.get('optimizer_steps', 0)} optimizer steps)")


def read_journal(path, index=":"):
    """The labelled frames of a label journal (extxyz, written by fix otf/train ... journal) as
    ASE Atoms with the reference's energy and forces (atoms.get_potential_energy(),
    atoms.get_forces()). index: ASE's index (":" every frame, -1 the last)."""
    import ase.io  # ASE is needed for this helper only

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"label journal '{path}' does not exist")
    return ase.io.read(path, index=index, format="extxyz")


def __getattr__(name):
    # The calculator imports ASE; `import otf_torch` alone does not need it.
    if name == "OTFCalculator":
        from .ase_calculator import OTFCalculator
        return OTFCalculator
    raise AttributeError(f"module 'otf_torch' has no attribute '{name}'")

"""An ASE calculator on an OTF-Torch model: energy, forces, stress, per-atom energies and the
committee's per-atom force uncertainty, evaluated by the C++ of pair_style otf. Usable with ASE's
MD, optimisers, ase.phonons and EOS fits. The model must be in LAMMPS' metal units (eV, Angstrom),
which are ASE's."""
import numpy as np
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes

from . import Model


class OTFCalculator(Calculator):
    """OTFCalculator(model, precision=None, force_uncertainty=True)

    model: a path to a model file (or JSON spec) or an otf_torch.Model. After a calculation
    results['force_uncertainty'] holds each atom's committee force spread (eV/A) and
    results['energy_uncertainty'] each atom's energy spread (eV); set force_uncertainty=False to
    skip the former (one backward pass per committee member).
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies",
                              "force_uncertainty", "energy_uncertainty"]
    nolabel = True

    def __init__(self, model, precision=None, force_uncertainty=True, **kwargs):
        super().__init__(**kwargs)
        if isinstance(model, Model):
            if precision is not None and precision != model.precision:
                raise ValueError("give the precision when loading the Model, not to the "
                                 "calculator of a loaded one")
            self.model = model
        else:
            self.model = Model(model, precision=precision)
        if self.model.units != "metal":
            raise ValueError(f"model '{self.model.path}' is in LAMMPS units '{self.model.units}'; "
                             "the ASE calculator needs a model in 'metal' units (eV, Angstrom), "
                             "ASE's own")
        self.force_uncertainty = bool(force_uncertainty)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        atoms = self.atoms
        pbc = np.asarray(atoms.pbc, dtype=bool)
        if pbc.all():
            cell = np.asarray(atoms.cell[:], dtype=np.float64)
        elif not pbc.any():
            cell = None
        else:
            raise ValueError(f"pbc {pbc.tolist()}: OTF-Torch evaluates cells periodic in all three "
                             "directions or in none (pad a slab with vacuum and make it periodic)")
        out = self.model.evaluate(atoms.positions, atoms.get_chemical_symbols(), cell,
                                  force_uncertainty=self.force_uncertainty)
        self.results["energy"] = out["energy"]
        self.results["free_energy"] = out["energy"]
        self.results["forces"] = out["forces"]
        self.results["energies"] = out["energies"]
        self.results["energy_uncertainty"] = out["energy_uncertainties"]
        if self.force_uncertainty:
            self.results["force_uncertainty"] = out["force_uncertainties"]
        if cell is not None:
            # virial W = sum r f; stress = -W / V, in ASE's Voigt order xx yy zz yz xz xy.
            xx, yy, zz, xy, xz, yz = out["virial"]
            self.results["stress"] = -np.array([xx, yy, zz, yz, xz, xy]) / atoms.get_volume()
        elif "stress" in properties:
            raise PropertyNotImplementedError("stress needs a cell periodic in all three "
                                              "directions")

// Conversion between an MD code's unit system (LAMMPS' unit style names) and the atomic units
// (Bohr, Hartree) that the i-PI protocol speaks (docs/design.md §12). CODATA 2018 values, as the
// i-PI clients (CP2K, ASE) use them.
#pragma once

#include <string>

namespace otf {

struct AtomicUnitConversion {
  std::string unit_style;           // e.g. "metal"
  double bohr_per_length = 1.0;     // one MD length unit in Bohr
  double hartree_per_energy = 1.0;  // one MD energy unit in Hartree
  // One MD force unit (energy / length) in Hartree / Bohr.
  double hartree_per_bohr_per_force() const { return hartree_per_energy / bohr_per_length; }
};

// For metal, real, electron, si, cgs, micro and nano; throws std::invalid_argument naming the
// unit style and listing these (lj has no physical scale).
AtomicUnitConversion atomic_unit_conversion(const std::string& unit_style);

}  // namespace otf

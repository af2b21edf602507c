// The model's input/output contract with an MD code, in plain arrays (LAMMPS' layout, no LAMMPS
// types): positions of owned and ghost atoms, their species, a full neighbour list of the centre
// atoms; out come energies, forces on every given atom (ghosts too: the MD code folds them onto
// their owners), virials and uncertainties. Pointers are borrowed for one call.
#pragma once

#include <array>
#include <cstdint>

namespace otf {

struct AtomicSystemView {
  int num_atoms = 0;                 // owned + ghost atoms
  int num_local = 0;                 // the first num_local atoms are owned
  const double* positions = nullptr;  // [num_atoms][3], row-major (LAMMPS' x[0])
  // Model species index per atom; negative: the atom is ignored (a type left to another style).
  const int* species = nullptr;
  // Full neighbour list: centre centers[n] has neighbor_counts[n] neighbours neighbors[n][0..).
  // Neighbours beyond the cutoff (a list with skin) are skipped here.
  int num_centers = 0;
  const int* centers = nullptr;
  const int* neighbor_counts = nullptr;
  const int* const* neighbors = nullptr;
  // Applied to every neighbour index (LAMMPS' NEIGHMASK strips special-bond bits).
  int neighbor_index_mask = ~0;
};

// Where results go; null pointers are not computed. Every array is ADDED to, so an MD code can
// pass its own force and per-atom arrays (hybrid/overlay styles add up).
struct EvaluationOutputs {
  double* forces = nullptr;         // [num_atoms][3]
  double* atom_energy = nullptr;    // [num_atoms], filled for centres
  double* atom_virial = nullptr;    // [num_atoms][6] xx yy zz xy xz yz; each pair's virial split
                                    // equally between its two atoms
  // [num_atoms]: standard deviation over committee members of the centre's atomic energy.
  double* atom_energy_uncertainty = nullptr;
  // [members][num_atoms][3]: each member's forces (costs one backward pass per member).
  double* member_forces = nullptr;
};

struct EvaluationTotals {
  double energy = 0.0;                    // sum of the centres' energies (committee mean)
  std::array<double, 6> virial{};         // sum_i x_i f_i: xx yy zz xy xz yz
  double max_energy_uncertainty = 0.0;    // over the centres
  int64_t pairs_within_cutoff = 0;        // neighbour pairs the model saw
};

}  // namespace otf

// A periodic configuration turned into the AtomicSystemView layout an MD code provides: owned
// atoms, ghost images within the cutoff of the cell, and a full neighbour list of the owned atoms
// (binned, linear in the atom count). For tests, benchmarks and examples; triclinic cells allowed.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "atomic_system.h"

namespace otf {

struct PeriodicConfiguration {
  // Rows are the cell vectors a, b, c (any orientation; right-handed or not).
  std::array<std::array<double, 3>, 3> cell{};
  std::vector<double> positions;  // [atoms][3] Cartesian, any image
  std::vector<int> species;       // [atoms]
  int num_atoms() const { return static_cast<int>(species.size()); }
};

class PeriodicSystem {
 public:
  // `list_cutoff` >= the model cutoff (a skin is allowed). Throws std::invalid_argument for a
  // degenerate cell or mismatched arrays.
  PeriodicSystem(const PeriodicConfiguration& configuration, double list_cutoff);
  // The view points into this object's storage: copies would point into the original's.
  PeriodicSystem(const PeriodicSystem&) = delete;
  PeriodicSystem& operator=(const PeriodicSystem&) = delete;
  PeriodicSystem(PeriodicSystem&&) = default;
  PeriodicSystem& operator=(PeriodicSystem&&) = default;

  // Valid while this object lives and is not moved.
  AtomicSystemView view() const;

  int num_local() const { return num_local_; }
  int num_atoms() const { return static_cast<int>(species_.size()); }
  // Owner (index among the owned atoms) of every atom, owned atoms included.
  const std::vector<int>& owner() const { return owner_; }
  const std::vector<double>& positions() const { return positions_; }
  // Forces (or any [atoms][3] array) of all atoms folded onto their owners: [num_local][3].
  std::vector<double> fold_onto_owners(const std::vector<double>& per_atom_xyz) const;
  double average_neighbors() const;

 private:
  int num_local_ = 0;
  std::vector<double> positions_;
  std::vector<int> species_;
  std::vector<int> owner_;
  std::vector<int> centers_;
  std::vector<int> neighbor_counts_;
  std::vector<std::vector<int>> neighbor_storage_;
  std::vector<const int*> neighbor_pointers_;
};

// A diamond-cubic crystal of n x n x n conventional cells (8 atoms each) with lattice constant a,
// positions jittered by `jitter` (uniform in [-jitter, jitter] per component, seeded), species 0.
PeriodicConfiguration diamond_crystal(int cells_per_side, double lattice_constant, double jitter,
                                      uint64_t seed);

}  // namespace otf

// The one adaptor between an MD code's arrays (LAMMPS' layout: positions x[0], types, a neighbour
// list indexed by atom) and the model's input contract (atomic_system.h). pair_style otf,
// pair_style otf/kk and fix otf/train all build their AtomicSystemView here; it knows no LAMMPS
// types, so it is tested without LAMMPS (tests/potentials/test_md_system_adaptor.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "atomic_system.h"

namespace otf {

// An MD code's neighbour list, borrowed: ilist names the listed atoms (inum owned ones, then gnum
// ghosts for a list with ghost entries), numneigh and the neighbour rows are indexed by atom.
// A row is row_pointers[i] (LAMMPS' firstneigh) or, when row_pointers is null, rows + i *
// row_stride (a Kokkos view with contiguous rows).
struct MdNeighborList {
  int inum = 0;
  int gnum = 0;
  const int* ilist = nullptr;
  const int* numneigh = nullptr;
  const int* const* row_pointers = nullptr;
  const int* rows = nullptr;
  int64_t row_stride = 0;
  int index_mask = ~0;  // applied to every neighbour index (LAMMPS' NEIGHMASK)

  const int* row(int atom) const {
    if (row_pointers != nullptr) return row_pointers[atom];
    return rows != nullptr ? rows + atom * row_stride : nullptr;
  }
};

// The atoms of one step: owned atoms first, then ghosts.
struct MdAtoms {
  int num_local = 0;
  int num_ghost = 0;
  const double* positions = nullptr;  // [num_local + num_ghost][3]
  const int* types = nullptr;         // [num_local + num_ghost], 1-based MD types
};

class MdSystemAdaptor {
 public:
  // species_of_type[t]: the model's species of MD type t (index 0 unused), -1 for ignored types.
  void set_species_of_type(std::vector<int> species_of_type);
  const std::vector<int>& species_of_type() const { return species_of_type_; }

  // The list's inum centres as the pair styles evaluate them (energies of every centre count).
  const AtomicSystemView& listed_centres(const MdAtoms& atoms, const MdNeighborList& list);

  // A rank's part of a training frame split over ranks: its owned atoms with a species, then the
  // ghost atoms within `cutoff` of one of them, as centres (the list must have ghost entries);
  // center_energy_counts() marks the owned ones (potentials/potential_training.h).
  const AtomicSystemView& owned_and_nearby_ghost_centres(const MdAtoms& atoms,
                                                         const MdNeighborList& list,
                                                         double cutoff);

  // A training frame held whole by one rank: its owned atoms with a species as centres, every
  // ghost folded onto the owned atom it is a periodic image of (same id). Throws
  // std::runtime_error for a ghost whose id no owned atom has.
  template <typename Id>
  const AtomicSystemView& owned_centres_folding_images(const MdAtoms& atoms,
                                                       const MdNeighborList& list, const Id* ids);

  const AtomicSystemView& view() const { return view_; }
  // [centres]: 1 where the centre's energy counts on this rank (owned), 0 for ghost centres.
  const unsigned char* center_energy_counts() const { return center_energy_counts_.data(); }
  // [atoms]: the owned atom each atom's force belongs to; null unless folding images.
  const int* force_owner() const { return folding_ ? force_owner_.data() : nullptr; }

 private:
  void set_atoms(const MdAtoms& atoms);
  void add_center(int atom, const MdNeighborList& list, int entry, bool energy_counts);
  const AtomicSystemView& finish(const MdAtoms& atoms, const MdNeighborList& list);
  const AtomicSystemView& owned_centres(const MdAtoms& atoms, const MdNeighborList& list);
  // Owned atoms with a species, then ghosts marked in near_owned_, in atom order.
  const AtomicSystemView& centres_in_atom_order(const MdAtoms& atoms, const MdNeighborList& list);

  std::vector<int> species_of_type_;
  std::vector<int> atom_species_;
  std::vector<int> centers_;
  std::vector<unsigned char> center_energy_counts_;
  std::vector<int> center_neighbor_counts_;
  std::vector<const int*> center_neighbors_;
  std::vector<int> entry_of_atom_;
  std::vector<unsigned char> near_owned_;
  std::vector<int> force_owner_;
  bool folding_ = false;
  AtomicSystemView view_;
};

template <typename Id>
const AtomicSystemView& MdSystemAdaptor::owned_centres_folding_images(const MdAtoms& atoms,
                                                                      const MdNeighborList& list,
                                                                      const Id* ids) {
  const int nall = atoms.num_local + atoms.num_ghost;
  std::unordered_map<Id, int> owned_by_id;
  owned_by_id.reserve(static_cast<std::size_t>(atoms.num_local));
  for (int i = 0; i < atoms.num_local; ++i) owned_by_id[ids[i]] = i;
  force_owner_.resize(static_cast<std::size_t>(nall));
  for (int i = 0; i < nall; ++i) {
    const auto owner = owned_by_id.find(ids[i]);
    if (owner == owned_by_id.end())
      throw std::runtime_error("ghost atom " + std::to_string(i) + " (ID " +
                               std::to_string(ids[i]) + ") is not an image of an owned atom");
    force_owner_[static_cast<std::size_t>(i)] = owner->second;
  }
  owned_centres(atoms, list);
  folding_ = true;
  return view_;
}

}  // namespace otf

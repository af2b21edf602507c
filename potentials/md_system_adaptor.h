// The one adaptor between an MD code's arrays (LAMMPS' layout: positions x[0], types, a neighbour
// list indexed by atom) and the model's input contract (atomic_system.h). pair_style otf,
// pair_style otf/kk and fix otf/train all build their AtomicSystemView here; it knows no LAMMPS
// types, so it is tested without LAMMPS (tests/potentials/test_md_system_adaptor.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
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

  // A rank's part of a training frame: its owned atoms with a species as centres, in atom order
  // (the list needs no ghost entries). centre_of_owned() then gives each owned atom's centre index.
  const AtomicSystemView& owned_centres(const MdAtoms& atoms, const MdNeighborList& list);

  const AtomicSystemView& view() const { return view_; }
  // [num_local] after owned_centres: each owned atom's index among the centres, -1 for an atom
  // of no species (what a training frame's owner_centre holds for it, training_session.h).
  const int* centre_of_owned() const { return centre_of_owned_.data(); }

 private:
  void set_atoms(const MdAtoms& atoms);
  void add_center(int atom, const MdNeighborList& list, int entry);
  const AtomicSystemView& finish(const MdAtoms& atoms, const MdNeighborList& list);

  std::vector<int> species_of_type_;
  std::vector<int> atom_species_;
  std::vector<int> centers_;
  std::vector<int> center_neighbor_counts_;
  std::vector<const int*> center_neighbors_;
  std::vector<int> entry_of_atom_;
  std::vector<int> centre_of_owned_;
  AtomicSystemView view_;
};

}  // namespace otf

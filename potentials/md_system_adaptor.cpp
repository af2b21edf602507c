#include "md_system_adaptor.h"

#include <utility>

namespace otf {

void MdSystemAdaptor::set_species_of_type(std::vector<int> species_of_type) {
  species_of_type_ = std::move(species_of_type);
}

void MdSystemAdaptor::set_atoms(const MdAtoms& atoms) {
  const int nall = atoms.num_local + atoms.num_ghost;
  atom_species_.resize(static_cast<std::size_t>(nall));
  const int types = static_cast<int>(species_of_type_.size());
  for (int i = 0; i < nall; ++i) {
    const int type = atoms.types[i];
    if (type < 1 || type >= types)
      throw std::invalid_argument("atom " + std::to_string(i) + " has type " +
                                  std::to_string(type) + ", outside the type map 1.." +
                                  std::to_string(types - 1));
    atom_species_[static_cast<std::size_t>(i)] = species_of_type_[static_cast<std::size_t>(type)];
  }
  centers_.clear();
  center_energy_counts_.clear();
  center_neighbor_counts_.clear();
  center_neighbors_.clear();
  folding_ = false;
}

void MdSystemAdaptor::add_center(int atom, const MdNeighborList& list, int entry,
                                 bool energy_counts) {
  const int listed = list.ilist[entry];
  centers_.push_back(atom);
  center_energy_counts_.push_back(energy_counts ? 1 : 0);
  center_neighbor_counts_.push_back(list.numneigh[listed]);
  center_neighbors_.push_back(list.row(listed));
}

const AtomicSystemView& MdSystemAdaptor::finish(const MdAtoms& atoms, const MdNeighborList& list) {
  view_ = AtomicSystemView{};
  view_.num_atoms = atoms.num_local + atoms.num_ghost;
  view_.num_local = atoms.num_local;
  view_.positions = atoms.positions;
  view_.species = atom_species_.data();
  view_.num_centers = static_cast<int>(centers_.size());
  view_.centers = centers_.data();
  view_.neighbor_counts = center_neighbor_counts_.data();
  view_.neighbors = center_neighbors_.data();
  view_.neighbor_index_mask = list.index_mask;
  return view_;
}

const AtomicSystemView& MdSystemAdaptor::listed_centres(const MdAtoms& atoms,
                                                        const MdNeighborList& list) {
  set_atoms(atoms);
  for (int ii = 0; ii < list.inum; ++ii) add_center(list.ilist[ii], list, ii, true);
  return finish(atoms, list);
}

const AtomicSystemView& MdSystemAdaptor::owned_centres(const MdAtoms& atoms,
                                                       const MdNeighborList& list) {
  set_atoms(atoms);
  near_owned_.assign(static_cast<std::size_t>(atoms.num_local + atoms.num_ghost), 0);
  return centres_in_atom_order(atoms, list);
}

const AtomicSystemView& MdSystemAdaptor::owned_and_nearby_ghost_centres(
    const MdAtoms& atoms, const MdNeighborList& list, double cutoff) {
  set_atoms(atoms);
  const int nlocal = atoms.num_local;
  const int nall = nlocal + atoms.num_ghost;
  const double cutoff_sq = cutoff * cutoff;
  const double* x = atoms.positions;
  near_owned_.assign(static_cast<std::size_t>(nall), 0);
  for (int ii = 0; ii < list.inum; ++ii) {
    const int i = list.ilist[ii];
    if (i >= nlocal || atom_species_[static_cast<std::size_t>(i)] < 0) continue;
    const int* neighbors = list.row(i);
    for (int jj = 0; jj < list.numneigh[i]; ++jj) {
      const int j = neighbors[jj] & list.index_mask;
      if (j < nlocal) continue;
      const double dx = x[3 * j] - x[3 * i], dy = x[3 * j + 1] - x[3 * i + 1],
                   dz = x[3 * j + 2] - x[3 * i + 2];
      if (dx * dx + dy * dy + dz * dz < cutoff_sq) near_owned_[static_cast<std::size_t>(j)] = 1;
    }
  }
  return centres_in_atom_order(atoms, list);
}

const AtomicSystemView& MdSystemAdaptor::centres_in_atom_order(const MdAtoms& atoms,
                                                               const MdNeighborList& list) {
  const int nlocal = atoms.num_local;
  const int nall = nlocal + atoms.num_ghost;
  // A ghost list's ilist holds owned atoms, then ghosts: find every atom's entry.
  entry_of_atom_.assign(static_cast<std::size_t>(nall), -1);
  for (int ii = 0; ii < list.inum + list.gnum; ++ii)
    entry_of_atom_[static_cast<std::size_t>(list.ilist[ii])] = ii;
  // Centres in atom order: owned atoms first, then the ghosts near them.
  for (int i = 0; i < nall; ++i) {
    if (atom_species_[static_cast<std::size_t>(i)] < 0 ||
        (i >= nlocal && !near_owned_[static_cast<std::size_t>(i)]))
      continue;
    const int entry = entry_of_atom_[static_cast<std::size_t>(i)];
    if (entry < 0)
      throw std::runtime_error("atom " + std::to_string(i) +
                               " has no neighbour list entry (a ghost list is needed)");
    add_center(i, list, entry, i < nlocal);
  }
  return finish(atoms, list);
}

}  // namespace otf

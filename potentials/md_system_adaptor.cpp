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
  center_neighbor_counts_.clear();
  center_neighbors_.clear();
}

void MdSystemAdaptor::add_center(int atom, const MdNeighborList& list, int entry) {
  const int listed = list.ilist[entry];
  centers_.push_back(atom);
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
  for (int ii = 0; ii < list.inum; ++ii) add_center(list.ilist[ii], list, ii);
  return finish(atoms, list);
}

const AtomicSystemView& MdSystemAdaptor::owned_centres(const MdAtoms& atoms,
                                                       const MdNeighborList& list) {
  set_atoms(atoms);
  const int nlocal = atoms.num_local;
  // ilist need not be in atom order: find every owned atom's entry.
  entry_of_atom_.assign(static_cast<std::size_t>(nlocal), -1);
  for (int ii = 0; ii < list.inum; ++ii)
    if (list.ilist[ii] >= 0 && list.ilist[ii] < nlocal)
      entry_of_atom_[static_cast<std::size_t>(list.ilist[ii])] = ii;
  centre_of_owned_.assign(static_cast<std::size_t>(nlocal), -1);
  for (int i = 0; i < nlocal; ++i) {
    if (atom_species_[static_cast<std::size_t>(i)] < 0) continue;
    const int entry = entry_of_atom_[static_cast<std::size_t>(i)];
    if (entry < 0)
      throw std::runtime_error("owned atom " + std::to_string(i) + " has no neighbour list entry");
    centre_of_owned_[static_cast<std::size_t>(i)] = static_cast<int>(centers_.size());
    add_center(i, list, entry);
  }
  return finish(atoms, list);
}

}  // namespace otf

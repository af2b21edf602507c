/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: LAMMPS' host arrays and neighbour lists as the MD arrays the
   one MD-to-model adaptor reads (potentials/md_system_adaptor.h); shared by
   pair_style otf and fix otf/train.
------------------------------------------------------------------------- */

#ifndef LMP_OTF_LAMMPS_MD_ARRAYS_H
#define LMP_OTF_LAMMPS_MD_ARRAYS_H

#include "atom.h"
#include "md_system_adaptor.h"
#include "neigh_list.h"
#include "neighbor.h"

namespace LAMMPS_NS {

inline otf::MdAtoms md_atoms(const Atom *atom)
{
  otf::MdAtoms atoms;
  atoms.num_local = atom->nlocal;
  atoms.num_ghost = atom->nghost;
  atoms.positions = atom->x[0];
  atoms.types = atom->type;
  return atoms;
}

// A host neighbour list (firstneigh row pointers); gnum counts its ghost entries, if any.
inline otf::MdNeighborList md_neighbor_list(const NeighList *list)
{
  otf::MdNeighborList neighbors;
  neighbors.inum = list->inum;
  neighbors.gnum = list->gnum;
  neighbors.ilist = list->ilist;
  neighbors.numneigh = list->numneigh;
  neighbors.row_pointers = list->firstneigh;
  neighbors.index_mask = NEIGHMASK;
  return neighbors;
}

}    // namespace LAMMPS_NS

#endif

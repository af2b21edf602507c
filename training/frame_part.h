// A rank's part of one labelled configuration, as the MD code hands it to the training layer
// (LAMMPS' arrays, borrowed for one call): what the training session stores, trains on and
// measures the committee on. No LibTorch here: LAMMPS styles include it.
#pragma once

#include <array>
#include <cstdint>

#include "atomic_system.h"

namespace otf {

// system.centers lists the centres: the rank's owned atoms with a species, in atom order
// (MdSystemAdaptor::owned_centres); owned atoms are the first system.num_local atoms and their
// reference forces are labelled. Every atom's force belongs to an owned atom of some rank:
// owner_rank[j] and owner_centre[j] name it (the rank, and the atom's index among that rank's
// centres; -1 for an atom of no species). An owned atom names itself; a ghost names the atom it is
// an image of, which may be this rank's (periodic images) or another rank's (the MD code's
// forward communication of the owners' values gives them). Null owner_rank: every atom is this
// rank's (one rank holds the frame). potentials/potential_training.h says how forces are routed.
struct FramePart {
  AtomicSystemView system;
  const double* owned_forces = nullptr;  // [system.num_local][3]
  const int* owner_rank = nullptr;       // [system.num_atoms] or null
  const int* owner_centre = nullptr;     // [system.num_atoms]
  double energy = 0.0;                   // whole frame (all ranks)
  std::array<double, 6> virial{};        // whole frame, xx yy zz xy xz yz
  double volume = 0.0;
  int64_t atoms_in_frame = 0;
};

}  // namespace otf

// Labelled-frame intake: a rank's part of a labelled configuration (FramePart, MD arrays) turned
// into what the model trains on (a NeighborGraph and FrameLabels, potentials/potential_training.h),
// keeping only the atoms the centres use.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "frame_part.h"
#include "neighbor_graph.h"
#include "potential_training.h"

namespace otf {

struct FrameGraph {
  NeighborGraph graph;
  // [kept atoms] int64: the frame atom that each graph atom is (owned atoms first: graph row n is
  // centre n).
  torch::Tensor kept_atoms;
  // Where each graph atom's force belongs: force_owner (graph rows of this rank) and the halo
  // (rows of atoms other ranks own, with their ranks and rows there); potential_training.h.
  ForceRouting routing;
};

// The frame's centres and neighbours within `cutoff` and only the atoms they use, with the
// routing of their forces (`rank`: this rank's number, which owner_rank compares with). Labels are not read. Throws std::invalid_argument for a part whose
// centres are not its owned atoms with a species, or whose owners are out of range.
FrameGraph frame_graph(const FramePart& frame, double cutoff, int rank);

// owner_centre for a part that holds every atom (one rank): the centre index of each atom's owner,
// from owner_atom[j], the owned atom that atom j is or is an image of (PeriodicSystem::owner()).
std::vector<int> owner_centres(const AtomicSystemView& system, const std::vector<int>& owner_atom);

// The frame's labels for that graph: energy and atom count of the whole frame, the owned atoms'
// forces, and with `stress` the stress -virial / volume.
FrameLabels frame_labels(const FramePart& frame, const FrameGraph& graph, bool stress);

// The rank's owned centres only (descriptor moments must count every atom of a frame once over
// all ranks; frames stored with ghost centres by earlier versions have others).
NeighborGraph owned_centres(const NeighborGraph& graph);

}  // namespace otf

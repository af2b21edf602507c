// Labelled-frame intake: a rank's part of a labelled configuration (FramePart, MD arrays) turned
// into what the model trains on (a NeighborGraph and FrameLabels, potentials/potential_training.h),
// keeping only the atoms the centres use.
#pragma once

#include <torch/torch.h>

#include "neighbor_graph.h"
#include "potential_training.h"
#include "training_session.h"

namespace otf {

struct FrameGraph {
  NeighborGraph graph;
  // [kept atoms] int64: the frame atom that each graph atom is (owned atoms first).
  torch::Tensor kept_atoms;
  // [kept atoms] int64: each graph atom's force owner (graph indices); undefined without folding.
  torch::Tensor force_owner;
};

// The frame's centres and neighbours within `cutoff` (centres of ignored species dropped; energies
// counted for the centres FramePart marks) and only the atoms they use. Labels are not read.
FrameGraph frame_graph(const FramePart& frame, double cutoff);

// The frame's labels for that graph: energy and atom count of the whole frame, the owned atoms'
// forces, and with `stress` the stress -virial / volume.
FrameLabels frame_labels(const FramePart& frame, const FrameGraph& graph, bool stress);

// The rank's owned centres only (descriptor moments must count every atom of a frame once over
// all ranks).
NeighborGraph owned_centres(const NeighborGraph& graph);

}  // namespace otf

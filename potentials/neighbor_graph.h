// Configurations as tensors for training: positions (owned and ghost atoms), species, centres and
// a padded neighbour index, for one or many frames. Predictions from it are differentiable with
// respect to the parameters (create_graph), so force and stress losses can be trained.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "atomic_system.h"
#include "local_environments.h"
#include "potential.h"

namespace otf {

struct NeighborGraph {
  torch::Tensor positions;       // [atoms, 3] floating
  torch::Tensor species;         // [atoms] int64; negative: ignored atom
  torch::Tensor centers;         // [centres] int64: atoms whose energy counts
  torch::Tensor neighbor_index;  // [centres, K] int64: neighbours within the cutoff, -1 padding
  torch::Tensor center_frame;    // [centres] int64: frame of each centre
  // [centres] bool, optional (undefined: all count): centres whose energy counts in the frame
  // energy and virial. Every centre's energy moves the atoms (forces): a rank includes ghost
  // centres near its owned atoms so that their forces are exact (potential_training.h).
  torch::Tensor center_energy_mask;
  int64_t num_frames = 1;

  // Concatenates graphs (indices shifted, frames renumbered in order).
  static NeighborGraph concatenate(const std::vector<NeighborGraph>& graphs);
  // The graph with every tensor on `device` (the model's; no copy when already there).
  NeighborGraph to(const torch::Device& device) const;
};

// The graph of a view: its atoms, its centres (ignored species dropped) and their neighbours within
// `cutoff` (ignored species dropped). One frame; positions float64.
NeighborGraph neighbor_graph_from_view(const AtomicSystemView& system, double cutoff);

// The graph without the atoms that no centre uses (a view carries every ghost of the MD code's
// ghost shell; a stored training frame needs only the centres and their neighbours). kept_atoms
// [kept] int64, ascending: the original index of every kept atom (owned atoms stay first).
NeighborGraph drop_unused_atoms(const NeighborGraph& graph, torch::Tensor* kept_atoms = nullptr);

// Local environments of the graph's centres, differentiable in graph.positions.
LocalEnvironments local_environments(const NeighborGraph& graph, int64_t num_species,
                                     double cutoff, torch::ScalarType dtype);

struct PredictionOptions {
  bool forces = true;
  bool virial = true;
  // Keep the graph of forces and virial (training: their losses need parameter gradients).
  bool create_graph = false;
  // Forces are computed as grad(scale * E) / scale: the float16 gradient-penalty recipe
  // (docs/design.md §7.8, pitfall 5) lets small force contributions survive fp16. 1 otherwise.
  double gradient_scale = 1.0;
  // Also every member's own forces and virials (Potential::member_energies_and_pair_gradients).
  bool member_forces = false;
  // With member_forces: false takes the generic per-member evaluation instead of the
  // architecture's shared one (the reference it is tested and benchmarked against).
  bool shared_member_work = true;
};

struct Prediction {
  torch::Tensor energy;                  // [frames] float64, committee mean
  torch::Tensor member_energy;           // [members, frames] float64
  torch::Tensor member_atomic_energies;  // [members, centres] float64
  torch::Tensor forces;                  // [atoms, 3] (committee mean), positions' dtype
  torch::Tensor virial;                  // [frames, 3, 3]: sum_i x_i f_i
  torch::Tensor member_forces;           // [members, atoms, 3] (with options.member_forces)
  torch::Tensor member_virial;           // [members, frames, 3, 3] (with options.member_forces)
};

// Energies, forces on every atom of the graph and virials, from the committee mean.
Prediction predict(Potential& potential, const NeighborGraph& graph,
                   const PredictionOptions& options = {});

}  // namespace otf

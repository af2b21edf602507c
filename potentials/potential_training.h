// What connects a Potential to the engine's TrainingStrategy: labelled frames stored as
// TrainingBatch (named tensors, so the replay buffer and checkpoints need not know the model), the
// training function that predicts energies, forces and stresses of a batch of frames, and the loss
// that trains every committee member on its own predictions.
//
// Data parallelism (one LAMMPS frame split over MPI ranks): a rank's part of a frame holds its
// owned atoms, the ghost atoms around them, and as centres its owned atoms (their energies count,
// center_energy_mask) plus the ghost atoms within the cutoff of an owned atom (their energies do
// not count here, but they move the owned atoms: with them the forces on owned atoms are exact).
// The frame energy is the sum over ranks of the owned centres' energies; the training function
// sums it across ranks in the forward pass and keeps each rank's own part in the graph, so that
// summing parameter gradients over ranks gives the single-process gradient.
//
// Folding (a part that holds the whole frame, e.g. one MPI rank): the centres are the frame's own
// atoms only, and the ghost atoms, periodic images of them, hand their forces to their atoms
// (force_owner). The forces on the frame's atoms are then exact without ghost centres, whose
// count grows with the cutoff cubed (most of the cost of small cells).
// A part of a frame split over ranks cannot simply fold as well: a ghost centre owned by another
// rank that sees an image of a local atom would hand that derivative to the atom a second time
// (the ghost centre's image next to the atom itself already counts it). Such parts keep their
// ghost centres.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "communicator.h"
#include "losses.h"
#include "neighbor_graph.h"
#include "training_batch.h"
#include "training_strategy.h"

namespace otf {

struct FrameLabels {
  double energy = 0.0;           // of the whole frame (all ranks' atoms)
  torch::Tensor forces;          // [atoms, 3] float64; rows where force_mask is false are ignored
  torch::Tensor force_mask;      // [atoms] bool: atoms whose forces are labelled here (owned)
  torch::Tensor stress;          // optional [3, 3]: -virial / volume of the whole frame
  double volume = 0.0;           // of the frame's cell; needed with stress
  int64_t atoms_in_frame = 0;    // over all ranks (per-atom energy loss)
  // Optional [atoms] int64: the atom that each atom's force is added to (itself, or for a
  // periodic image the atom it is an image of). Undefined: no folding.
  torch::Tensor force_owner;
};

// forces [..., atoms, 3] with each atom's force added to its owner's row (and the images' rows
// zero), differentiably: F_i = sum over the images j of i of dE/dx_j.
torch::Tensor fold_forces(const torch::Tensor& forces, const torch::Tensor& force_owner);

// A frame as a TrainingBatch. Names: "positions", "species", "centers", "neighbor_index",
// "center_frame", "center_energy_mask", "energy" [1], "forces", "force_mask", "atoms_per_frame"
// [1], "stress" [1,3,3] with "volume" [1] when labelled, and "force_owner" when folding.
TrainingBatch labelled_frame(const NeighborGraph& graph, const FrameLabels& labels);
// Frames stacked into one batch (indices shifted, frames numbered in order).
TrainingBatch concatenate_frames(const std::vector<TrainingBatch>& frames);
NeighborGraph neighbor_graph_from_batch(const TrainingBatch& batch);

struct PotentialTrainingOptions {
  // Train every member on its own energies and forces (the committee's disagreement then
  // measures uncertainty); false trains the committee mean only (cheaper, members drift together).
  bool train_members = true;
  bool stress = false;
  // Sums frame energies over ranks; null: one process.
  std::shared_ptr<Communicator> communicator;
};

// The strategy's training function for the model named "main" (a Potential). Predictions:
// "energy" [frames], "forces" [atoms, 3], "stress" [frames, 3, 3] (if asked); with train_members
// they hold every member's predictions stacked member-major ([members * frames], ...), which
// member_expanded_batch() matches.
TrainingFunction potential_training_function(PotentialTrainingOptions options);

// The loss for those predictions: the batch's labels repeated once per member when the
// predictions are member-resolved, then `loss`.
LossFunction potential_loss_function(std::shared_ptr<ComposedLoss> loss, int64_t members,
                                     bool train_members);

}  // namespace otf

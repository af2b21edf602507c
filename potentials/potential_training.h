// What connects a Potential to the engine's TrainingStrategy: labelled frames stored as
// TrainingBatch (named tensors, so the replay buffer and checkpoints need not know the model), the
// training function that predicts energies, forces and stresses of a batch of frames, and the loss
// that trains every committee member on its own predictions.
//
// Data parallelism (one MD frame split over MPI ranks): a rank's part of a frame holds its owned
// atoms, as centres, and the ghost atoms within the cutoff of them. The frame energy is the sum
// over ranks of the owned centres' energies; the training function sums it across ranks in the
// forward pass and keeps each rank's own part in the graph, so that summing parameter gradients
// over ranks gives the single-process gradient. A centre's energy also moves ghost atoms: those
// force contributions belong to the atoms the ghosts are images of. Images of this rank's own
// atoms (periodic images; all ghosts when one rank holds the frame) hand their forces to them
// locally (force_owner); the rows of atoms that another rank owns are sent to that rank and added
// to its rows there (the halo: halo_rows, halo_ranks, halo_owner_rows), the reverse communication
// an MD code does with ghost forces. The exchange is differentiable: its backward pass is the
// matching forward communication (each owner's gradient sent back to the ghost rows), so the
// force loss on owned atoms and its parameter gradient are exact, and every rank evaluates its
// owned centres only: work and memory per rank follow its owned atoms plus one cutoff shell.
//
// Frames stored by earlier versions on several ranks instead carry ghost centres whose energies do
// not count (center_energy_mask) and no halo; they still train exactly.
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
  // Optional [halo atoms] int64 each (all three or none): the rows of atoms that another rank
  // owns, that rank, and the atom's row in that rank's part of the frame.
  torch::Tensor halo_rows;
  torch::Tensor halo_ranks;
  torch::Tensor halo_owner_rows;
};

// forces [..., atoms, 3] with each atom's force added to its owner's row (and the images' rows
// zero), differentiably: F_i = sum over the images j of i of dE/dx_j.
torch::Tensor fold_forces(const torch::Tensor& forces, const torch::Tensor& force_owner);

// Where the forces of a batch's atoms belong (see the top of this file). Tensors int64; undefined
// when absent.
struct ForceRouting {
  torch::Tensor force_owner;        // [atoms]: local folding
  torch::Tensor halo_rows;          // [h]: rows whose atoms other ranks own
  torch::Tensor halo_ranks;         // [h]: the owning rank
  torch::Tensor halo_owner_rows;    // [h]: the atom's row in the owner's part of its frame
  torch::Tensor halo_frames;        // [h]: the frame (batch position) of each halo row
  torch::Tensor part_atom_offsets;  // [frames]: first row of each frame's part in this batch
  bool has_halo() const { return halo_rows.defined(); }
};
ForceRouting force_routing(const TrainingBatch& batch);

// The forces on this rank's owned atoms from the forces on every atom of its parts: images
// folded, halo rows sent to their owners and added there; image and halo rows come out zero.
// forces [..., atoms, 3], any floating dtype. Collective when the routing has a halo and there
// is more than one rank (every rank calls it for the same frames in the same order); its
// backward pass is collective too.
torch::Tensor owned_forces(const torch::Tensor& forces, const ForceRouting& routing,
                           const std::shared_ptr<Communicator>& communicator);

// A frame as a TrainingBatch. Names: "positions", "species", "centers", "neighbor_index",
// "center_frame", "center_energy_mask", "energy" [1], "forces", "force_mask", "atoms_per_frame"
// [1], "stress" [1,3,3] with "volume" [1] when labelled, "force_owner" when folding, and with a
// halo "halo_rows", "halo_ranks", "halo_owner_rows", "halo_frames" and "part_atom_offsets".
TrainingBatch labelled_frame(const NeighborGraph& graph, const FrameLabels& labels);
// Frames stacked into one batch (indices shifted, frames numbered in order).
TrainingBatch concatenate_frames(const std::vector<TrainingBatch>& frames);
NeighborGraph neighbor_graph_from_batch(const TrainingBatch& batch);

struct PotentialTrainingOptions {
  // Train every member on its own energies and forces (the committee's disagreement then
  // measures uncertainty); false trains the committee mean only (cheaper, members drift together).
  bool train_members = true;
  bool stress = false;
  // false: the generic per-member evaluation (PredictionOptions::shared_member_work).
  bool shared_member_work = true;
  // Sums frame energies over ranks and exchanges halo forces; null: one process.
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

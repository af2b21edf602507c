#include "potential_training.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "potential.h"

namespace otf {

TrainingBatch labelled_frame(const NeighborGraph& graph, const FrameLabels& labels) {
  const int64_t atoms = graph.positions.size(0);
  if (!labels.forces.defined() || labels.forces.sizes() != torch::IntArrayRef({atoms, 3}) ||
      !labels.force_mask.defined() || labels.force_mask.size(0) != atoms) {
    throw std::invalid_argument("labelled_frame: forces [" + std::to_string(atoms) +
                                ", 3] and force_mask [" + std::to_string(atoms) + "] expected");
  }
  TrainingBatch batch;
  batch.set("positions", graph.positions.detach().to(torch::kFloat64));
  batch.set("species", graph.species);
  batch.set("centers", graph.centers);
  batch.set("neighbor_index", graph.neighbor_index);
  batch.set("center_frame", torch::zeros_like(graph.centers));
  batch.set("center_energy_mask", graph.center_energy_mask.defined()
                                      ? graph.center_energy_mask
                                      : torch::ones_like(graph.centers, torch::kBool));
  batch.set("energy", torch::tensor({labels.energy}, torch::kFloat64));
  batch.set("forces", labels.forces.to(torch::kFloat64));
  batch.set("force_mask", labels.force_mask.to(torch::kBool));
  batch.set("atoms_per_frame",
            torch::tensor({static_cast<double>(labels.atoms_in_frame)}, torch::kFloat64));
  if (labels.stress.defined()) {
    if (!(labels.volume > 0.0)) throw std::invalid_argument("labelled_frame: a stress label needs the volume");
    batch.set("stress", labels.stress.to(torch::kFloat64).reshape({1, 3, 3}));
    batch.set("volume", torch::tensor({labels.volume}, torch::kFloat64));
  }
  if (labels.force_owner.defined()) {
    const torch::Tensor owner = labels.force_owner.to(torch::kInt64);
    if (owner.dim() != 1 || owner.size(0) != atoms ||
        (atoms > 0 && (owner.min().item<int64_t>() < 0 || owner.max().item<int64_t>() >= atoms))) {
      throw std::invalid_argument("labelled_frame: force_owner must be [" + std::to_string(atoms) +
                                  "] atom indices");
    }
    batch.set("force_owner", owner);
  }
  return batch;
}

torch::Tensor fold_forces(const torch::Tensor& forces, const torch::Tensor& force_owner) {
  const int64_t atom_dim = forces.dim() - 2;
  return torch::zeros_like(forces).index_add(atom_dim, force_owner, forces);
}

NeighborGraph neighbor_graph_from_batch(const TrainingBatch& batch) {
  NeighborGraph graph;
  graph.positions = batch.at("positions");
  graph.species = batch.at("species");
  graph.centers = batch.at("centers");
  graph.neighbor_index = batch.at("neighbor_index");
  graph.center_frame = batch.at("center_frame");
  graph.center_energy_mask = batch.at("center_energy_mask");
  graph.num_frames = batch.at("energy").size(0);
  return graph;
}

TrainingBatch concatenate_frames(const std::vector<TrainingBatch>& frames) {
  if (frames.empty()) throw std::invalid_argument("concatenate_frames: no frames");
  std::vector<NeighborGraph> graphs;
  for (const TrainingBatch& frame : frames) graphs.push_back(neighbor_graph_from_batch(frame));
  const NeighborGraph graph = NeighborGraph::concatenate(graphs);
  TrainingBatch batch;
  batch.set("positions", graph.positions);
  batch.set("species", graph.species);
  batch.set("centers", graph.centers);
  batch.set("neighbor_index", graph.neighbor_index);
  batch.set("center_frame", graph.center_frame);
  batch.set("center_energy_mask", graph.center_energy_mask);
  for (const char* name : {"energy", "forces", "force_mask", "atoms_per_frame", "stress", "volume"}) {
    if (!frames.front().contains(name)) continue;
    std::vector<torch::Tensor> parts;
    for (const TrainingBatch& frame : frames) {
      if (!frame.contains(name)) {
        throw std::invalid_argument(std::string("concatenate_frames: some frames lack '") + name + "'");
      }
      parts.push_back(frame.at(name));
    }
    batch.set(name, torch::cat(parts));
  }
  // Owners are atom indices: shifted as the frames' atoms are; frames without folding own their
  // atoms' forces.
  const bool folded = std::any_of(frames.begin(), frames.end(),
                                  [](const TrainingBatch& frame) { return frame.contains("force_owner"); });
  if (folded) {
    std::vector<torch::Tensor> owners;
    int64_t offset = 0;
    for (const TrainingBatch& frame : frames) {
      const int64_t atoms = frame.at("positions").size(0);
      owners.push_back((frame.contains("force_owner") ? frame.at("force_owner")
                                                      : torch::arange(atoms, torch::kInt64)) +
                       offset);
      offset += atoms;
    }
    batch.set("force_owner", torch::cat(owners));
  }
  return batch;
}

namespace {

// Frame energies summed over ranks in value, while the gradient flows into this rank's part only:
// the sum over ranks of the parameter gradients is then the gradient of the global loss.
torch::Tensor sum_over_ranks(const torch::Tensor& local, Communicator* communicator) {
  if (communicator == nullptr || communicator->size() == 1) return local;
  torch::Tensor total = local.detach().clone().contiguous();
  communicator->all_reduce_sum({total});
  return local + (total - local.detach());
}

// stress = -W / V for virials [n, 3, 3] and volumes [n].
torch::Tensor stress_from_virial(const torch::Tensor& virial, const torch::Tensor& volume) {
  return -virial / volume.to(virial.scalar_type()).reshape({-1, 1, 1});
}

}  // namespace

TrainingFunction potential_training_function(PotentialTrainingOptions options) {
  return [options](const NamedModels& models, const TrainingBatch& batch) {
    auto potential = std::dynamic_pointer_cast<Potential>(models.at("main"));
    if (!potential) throw std::invalid_argument("potential_training_function: model 'main' is not a Potential");
    const NeighborGraph graph = neighbor_graph_from_batch(batch);
    PredictionOptions prediction_options;
    prediction_options.forces = true;
    prediction_options.virial = options.stress;
    prediction_options.member_forces = options.train_members;
    prediction_options.create_graph = torch::GradMode::is_enabled();
    const Prediction prediction = predict(*potential, graph, prediction_options);
    Communicator* communicator = options.communicator.get();
    Predictions out;
    if (options.train_members) {
      const int64_t members = prediction.member_energy.size(0);
      out["energy"] = sum_over_ranks(prediction.member_energy, communicator).reshape({-1});
      const torch::Tensor forces = batch.contains("force_owner")
                                       ? fold_forces(prediction.member_forces, batch.at("force_owner"))
                                       : prediction.member_forces;
      out["forces"] = forces.reshape({-1, 3});
      if (options.stress) {
        // Member-major, as the energies: the frames' volumes repeated once per member.
        const torch::Tensor stress = stress_from_virial(prediction.member_virial.reshape({-1, 3, 3}),
                                                        batch.at("volume").repeat({members}));
        out["stress"] = sum_over_ranks(stress, communicator);
      }
    } else {
      out["energy"] = sum_over_ranks(prediction.energy, communicator);
      out["forces"] = batch.contains("force_owner")
                          ? fold_forces(prediction.forces, batch.at("force_owner"))
                          : prediction.forces;
      if (options.stress) {
        out["stress"] = sum_over_ranks(stress_from_virial(prediction.virial, batch.at("volume")), communicator);
      }
    }
    return out;
  };
}

LossFunction potential_loss_function(std::shared_ptr<ComposedLoss> loss, int64_t members,
                                     bool train_members) {
  return [loss, members, train_members](const Predictions& predictions, const TrainingBatch& batch,
                                        int64_t /*step*/, int64_t /*epoch*/) {
    if (!train_members || members == 1) return (*loss)(predictions, batch);
    TrainingBatch expanded;
    for (const auto& [name, tensor] : batch.tensors()) {
      if (name == "energy" || name == "forces" || name == "force_mask" || name == "atoms_per_frame" ||
          name == "stress") {
        std::vector<int64_t> repeats(static_cast<std::size_t>(tensor.dim()), 1);
        repeats[0] = members;
        expanded.set(name, tensor.repeat(repeats));
      } else if (name.size() > 16 && name.substr(name.size() - 16) == "_loss_normalizer") {
        // A data-parallel count is per member copy: the repeated labels count `members` times.
        expanded.set(name, tensor * static_cast<double>(members));
      }
    }
    return (*loss)(predictions, expanded);
  };
}

}  // namespace otf

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
  const int halo_parts = (labels.halo_rows.defined() ? 1 : 0) + (labels.halo_ranks.defined() ? 1 : 0) +
                         (labels.halo_owner_rows.defined() ? 1 : 0);
  if (halo_parts != 0) {
    const torch::Tensor rows = halo_parts == 3 ? labels.halo_rows.to(torch::kInt64).reshape({-1}) : torch::Tensor();
    const int64_t halo = rows.defined() ? rows.size(0) : -1;
    const auto sized = [halo](const torch::Tensor& t) { return t.numel() == halo; };
    if (halo_parts != 3 || !sized(labels.halo_ranks) || !sized(labels.halo_owner_rows) ||
        (halo > 0 && (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= atoms ||
                      labels.halo_ranks.min().item<int64_t>() < 0 ||
                      labels.halo_owner_rows.min().item<int64_t>() < 0))) {
      throw std::invalid_argument("labelled_frame: halo_rows (atom indices), halo_ranks and "
                                  "halo_owner_rows must be given together, of one length");
    }
    batch.set("halo_rows", rows);
    batch.set("halo_ranks", labels.halo_ranks.to(torch::kInt64).reshape({-1}));
    batch.set("halo_owner_rows", labels.halo_owner_rows.to(torch::kInt64).reshape({-1}));
    batch.set("halo_frames", torch::zeros({halo}, torch::kInt64));
    batch.set("part_atom_offsets", torch::zeros({1}, torch::kInt64));
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
  // Halo rows shift with the atoms; the owners' rows stay frame-local (the owner adds its own
  // offset of that frame, which part_atom_offsets gives).
  const bool halo = std::any_of(frames.begin(), frames.end(),
                                [](const TrainingBatch& frame) { return frame.contains("halo_rows"); });
  if (halo) {
    std::vector<torch::Tensor> rows, ranks, owner_rows, frame_numbers;
    std::vector<int64_t> offsets;
    int64_t offset = 0;
    for (std::size_t f = 0; f < frames.size(); ++f) {
      const TrainingBatch& frame = frames[f];
      offsets.push_back(offset);
      if (frame.contains("halo_rows")) {
        rows.push_back(frame.at("halo_rows") + offset);
        ranks.push_back(frame.at("halo_ranks"));
        owner_rows.push_back(frame.at("halo_owner_rows"));
        frame_numbers.push_back(torch::full_like(frame.at("halo_rows"), static_cast<int64_t>(f)));
      }
      offset += frame.at("positions").size(0);
    }
    batch.set("halo_rows", torch::cat(rows));
    batch.set("halo_ranks", torch::cat(ranks));
    batch.set("halo_owner_rows", torch::cat(owner_rows));
    batch.set("halo_frames", torch::cat(frame_numbers));
    batch.set("part_atom_offsets", torch::tensor(offsets, torch::kInt64));
  }
  return batch;
}

ForceRouting force_routing(const TrainingBatch& batch) {
  ForceRouting routing;
  if (batch.contains("force_owner")) routing.force_owner = batch.at("force_owner");
  if (batch.contains("halo_rows")) {
    routing.halo_rows = batch.at("halo_rows");
    routing.halo_ranks = batch.at("halo_ranks");
    routing.halo_owner_rows = batch.at("halo_owner_rows");
    routing.halo_frames = batch.at("halo_frames");
    routing.part_atom_offsets = batch.at("part_atom_offsets");
  }
  return routing;
}

namespace {

// Which rows go where in one halo exchange of a batch: rows sent to each rank, and the rows that
// what each rank sends here is added to. Built collectively (the owners' rows are frame-local:
// each owner turns them into rows of its own batch).
struct HaloPlan : torch::CustomClassHolder {
  std::shared_ptr<Communicator> communicator;
  std::vector<torch::Tensor> send_rows;     // per rank, rows of this batch
  std::vector<torch::Tensor> receive_rows;  // per rank, rows of this batch
  torch::Tensor all_send_rows;
};

c10::intrusive_ptr<HaloPlan> halo_plan(const ForceRouting& routing, int64_t atoms,
                                       const std::shared_ptr<Communicator>& communicator) {
  auto plan = c10::make_intrusive<HaloPlan>();
  plan->communicator = communicator;
  const int ranks = communicator->size();
  const int64_t frames = routing.part_atom_offsets.size(0);
  const torch::Tensor halo_ranks = routing.halo_ranks.cpu();
  // What is wrong here is agreed before anyone throws: a rank that threw alone would leave the
  // others waiting in the next exchange.
  std::string problem;
  if (halo_ranks.numel() > 0 &&
      (halo_ranks.min().item<int64_t>() < 0 || halo_ranks.max().item<int64_t>() >= ranks ||
       (halo_ranks == communicator->rank()).any().item<bool>())) {
    problem = "a frame part names owner ranks outside the other " + std::to_string(ranks - 1) +
              " ranks of this run (was it stored by a run on another number of ranks?)";
  }
  plan->all_send_rows = routing.halo_rows.cpu();
  // Per halo row: its frame and the owner's row there, which the owner turns into its own row.
  const torch::Tensor frame_and_owner_row =
      torch::stack({routing.halo_frames.cpu(), routing.halo_owner_rows.cpu()}, 1);
  std::vector<torch::Tensor> asked(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const torch::Tensor mine = (halo_ranks == r).nonzero().reshape({-1});
    plan->send_rows.push_back(plan->all_send_rows.index_select(0, mine));
    asked[static_cast<std::size_t>(r)] = frame_and_owner_row.index_select(0, mine);
  }
  const std::vector<torch::Tensor> received = communicator->exchange_rows(asked);
  const torch::Tensor offsets = routing.part_atom_offsets.cpu();
  for (int r = 0; r < ranks; ++r) {
    const torch::Tensor pairs = received[static_cast<std::size_t>(r)].cpu();
    torch::Tensor rows = torch::zeros({pairs.size(0)}, torch::kInt64);
    if (pairs.size(0) > 0 && problem.empty()) {
      const torch::Tensor frame = pairs.select(1, 0);
      if (frame.min().item<int64_t>() < 0 || frame.max().item<int64_t>() >= frames) {
        problem = "rank " + std::to_string(r) + " names a frame this rank's batch does not have";
      } else {
        rows = offsets.index_select(0, frame) + pairs.select(1, 1);
        if (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= atoms)
          problem = "rank " + std::to_string(r) + " names an atom row this rank's part does not have";
      }
    }
    plan->receive_rows.push_back(rows);
  }
  torch::Tensor failed = torch::full({1}, problem.empty() ? 0 : 1, torch::kInt32);
  communicator->all_reduce_max({failed});
  if (failed.item<int>() != 0) {
    throw std::invalid_argument("halo exchange: " +
                                (problem.empty() ? std::string("another rank's frame part does not match this rank's")
                                                 : problem));
  }
  return plan;
}

// rows of x [..., atoms, 3] along the atom dimension as [rows, rest] (what exchange_rows moves),
// and back.
torch::Tensor pack_rows(const torch::Tensor& x, const torch::Tensor& rows) {
  const int64_t atom_dim = x.dim() - 2;
  int64_t width = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != atom_dim) width *= x.size(d);
  return x.index_select(atom_dim, rows.to(x.device())).movedim(atom_dim, 0).reshape({rows.size(0), width});
}

torch::Tensor unpack_rows(const torch::Tensor& packed, const torch::Tensor& like) {
  const int64_t atom_dim = like.dim() - 2;
  std::vector<int64_t> shape{packed.size(0)};
  for (int64_t d = 0; d < like.dim(); ++d)
    if (d != atom_dim) shape.push_back(like.size(d));
  return packed.reshape(shape).movedim(0, atom_dim).to(like.scalar_type());
}

// x [..., atoms, 3] with the halo rows zeroed, and what the other ranks send added to the rows it
// belongs to: rows `send[r]` of x go to rank r, rank r's rows are added at `receive[r]`. The
// forward pass sends the halo rows to their owners; the backward pass is the same routine with
// the two sides swapped (each owner's gradient sent back to the halo rows that fed it).
torch::Tensor route_rows(const torch::Tensor& x, const HaloPlan& plan, const std::vector<torch::Tensor>& send,
                         const std::vector<torch::Tensor>& receive) {
  const int64_t atom_dim = x.dim() - 2;
  std::vector<torch::Tensor> packs;
  for (const torch::Tensor& rows : send) packs.push_back(pack_rows(x, rows));
  const std::vector<torch::Tensor> arrived = plan.communicator->exchange_rows(packs);
  torch::Tensor out = x.clone();
  out.index_fill_(atom_dim, plan.all_send_rows.to(x.device()), 0);
  for (std::size_t r = 0; r < receive.size(); ++r) {
    if (receive[r].numel() == 0) continue;
    out.index_add_(atom_dim, receive[r].to(x.device()), unpack_rows(arrived[r].to(x.device()), x));
  }
  return out;
}

class HaloExchange : public torch::autograd::Function<HaloExchange> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& forces,
                               const c10::intrusive_ptr<HaloPlan>& plan) {
    context->saved_data["plan"] = c10::IValue::make_capsule(plan);
    return route_rows(forces, *plan, plan->send_rows, plan->receive_rows);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto plan = c10::static_intrusive_pointer_cast<HaloPlan>(context->saved_data["plan"].toCapsule());
    return {route_rows(gradients[0], *plan, plan->receive_rows, plan->send_rows), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor owned_forces(const torch::Tensor& forces, const ForceRouting& routing,
                           const std::shared_ptr<Communicator>& communicator) {
  torch::Tensor folded =
      routing.force_owner.defined() ? fold_forces(forces, routing.force_owner.to(forces.device())) : forces;
  if (!routing.has_halo()) return folded;
  if (!communicator || communicator->size() == 1) {
    if (routing.halo_rows.numel() > 0)
      throw std::invalid_argument("owned_forces: the frame part has atoms of other ranks, and this "
                                  "run has one rank (was it stored by a run on more ranks?)");
    return folded;
  }
  const c10::intrusive_ptr<HaloPlan> plan = halo_plan(routing, forces.size(forces.dim() - 2), communicator);
  return HaloExchange::apply(folded, plan);
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
    prediction_options.shared_member_work = options.shared_member_work;
    prediction_options.create_graph = torch::GradMode::is_enabled();
    const Prediction prediction = predict(*potential, graph, prediction_options);
    const ForceRouting routing = force_routing(batch);
    Communicator* communicator = options.communicator.get();
    Predictions out;
    if (options.train_members) {
      const int64_t members = prediction.member_energy.size(0);
      out["energy"] = sum_over_ranks(prediction.member_energy, communicator).reshape({-1});
      out["forces"] = owned_forces(prediction.member_forces, routing, options.communicator).reshape({-1, 3});
      if (options.stress) {
        // Member-major, as the energies: the frames' volumes repeated once per member.
        const torch::Tensor stress = stress_from_virial(prediction.member_virial.reshape({-1, 3, 3}),
                                                        batch.at("volume").repeat({members}));
        out["stress"] = sum_over_ranks(stress, communicator);
      }
    } else {
      out["energy"] = sum_over_ranks(prediction.energy, communicator);
      out["forces"] = owned_forces(prediction.forces, routing, options.communicator);
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

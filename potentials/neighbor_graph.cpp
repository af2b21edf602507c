#include "neighbor_graph.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace otf {

NeighborGraph NeighborGraph::concatenate(const std::vector<NeighborGraph>& graphs) {
  if (graphs.empty()) throw std::invalid_argument("NeighborGraph::concatenate: no graphs");
  int64_t max_neighbors = 1;
  for (const NeighborGraph& g : graphs) max_neighbors = std::max(max_neighbors, g.neighbor_index.size(1));
  std::vector<torch::Tensor> positions, species, centers, neighbors, frames, masks;
  int64_t atom_offset = 0, frame_offset = 0;
  for (const NeighborGraph& g : graphs) {
    positions.push_back(g.positions);
    species.push_back(g.species);
    centers.push_back(g.centers + atom_offset);
    const torch::Tensor shifted =
        torch::where(g.neighbor_index >= 0, g.neighbor_index + atom_offset, g.neighbor_index);
    neighbors.push_back(torch::constant_pad_nd(
        shifted, {0, max_neighbors - g.neighbor_index.size(1)}, -1));
    frames.push_back(g.center_frame + frame_offset);
    masks.push_back(g.center_energy_mask.defined() ? g.center_energy_mask
                                                   : torch::ones_like(g.centers, torch::kBool));
    atom_offset += g.positions.size(0);
    frame_offset += g.num_frames;
  }
  NeighborGraph out;
  out.positions = torch::cat(positions);
  out.species = torch::cat(species);
  out.centers = torch::cat(centers);
  out.neighbor_index = torch::cat(neighbors);
  out.center_frame = torch::cat(frames);
  out.center_energy_mask = torch::cat(masks);
  out.num_frames = frame_offset;
  return out;
}

NeighborGraph NeighborGraph::to(const torch::Device& device) const {
  NeighborGraph out = *this;
  for (torch::Tensor* tensor : {&out.positions, &out.species, &out.centers, &out.neighbor_index,
                                &out.center_frame, &out.center_energy_mask}) {
    if (tensor->defined()) *tensor = tensor->to(device);
  }
  return out;
}

NeighborGraph neighbor_graph_from_view(const AtomicSystemView& system, double cutoff) {
  const double cutoff_sq = cutoff * cutoff;
  const double* x = system.positions;
  std::vector<int64_t> centers;
  std::vector<std::vector<int64_t>> lists;
  for (int n = 0; n < system.num_centers; ++n) {
    const int i = system.centers[n];
    if (i < 0 || i >= system.num_atoms) throw std::invalid_argument("neighbour list: centre index out of range");
    if (system.species[i] < 0) continue;
    std::vector<int64_t> list;
    for (int k = 0; k < system.neighbor_counts[n]; ++k) {
      const int j = system.neighbors[n][k] & system.neighbor_index_mask;
      if (j < 0 || j >= system.num_atoms) throw std::invalid_argument("neighbour list: index out of range");
      if (system.species[j] < 0) continue;
      const double dx = x[3 * j] - x[3 * i], dy = x[3 * j + 1] - x[3 * i + 1], dz = x[3 * j + 2] - x[3 * i + 2];
      if (dx * dx + dy * dy + dz * dz < cutoff_sq) list.push_back(j);
    }
    centers.push_back(i);
    lists.push_back(std::move(list));
  }
  std::size_t width = 1;
  for (const auto& list : lists) width = std::max(width, list.size());
  torch::Tensor index = torch::full({static_cast<int64_t>(lists.size()), static_cast<int64_t>(width)}, -1, torch::kInt64);
  auto rows = index.accessor<int64_t, 2>();
  for (std::size_t c = 0; c < lists.size(); ++c) {
    for (std::size_t k = 0; k < lists[c].size(); ++k) rows[static_cast<int64_t>(c)][static_cast<int64_t>(k)] = lists[c][k];
  }
  NeighborGraph graph;
  graph.positions = torch::from_blob(const_cast<double*>(x), {system.num_atoms, 3}, torch::kFloat64).clone();
  graph.species = torch::from_blob(const_cast<int*>(system.species), {system.num_atoms}, torch::kInt32).to(torch::kInt64);
  graph.centers = torch::tensor(centers, torch::kInt64);
  graph.neighbor_index = index;
  graph.center_frame = torch::zeros({static_cast<int64_t>(centers.size())}, torch::kInt64);
  graph.num_frames = 1;
  return graph;
}

NeighborGraph drop_unused_atoms(const NeighborGraph& graph, torch::Tensor* kept_atoms) {
  const int64_t atoms = graph.positions.size(0);
  const torch::Tensor valid = graph.neighbor_index >= 0;
  torch::Tensor used = torch::zeros({atoms}, torch::kBool);
  used.index_fill_(0, graph.centers, true);
  used.index_fill_(0, graph.neighbor_index.masked_select(valid), true);
  const torch::Tensor kept = used.nonzero().squeeze(1);
  torch::Tensor renumber = torch::full({atoms}, -1, torch::kInt64);
  renumber.index_put_({kept}, torch::arange(kept.size(0), torch::kInt64));
  NeighborGraph out = graph;
  out.positions = graph.positions.index_select(0, kept);
  out.species = graph.species.index_select(0, kept);
  out.centers = renumber.index_select(0, graph.centers);
  out.neighbor_index = torch::where(
      valid,
      renumber.index_select(0, graph.neighbor_index.clamp_min(0).reshape({-1})).reshape(graph.neighbor_index.sizes()),
      graph.neighbor_index);
  if (kept_atoms != nullptr) *kept_atoms = kept;
  return out;
}

LocalEnvironments local_environments(const NeighborGraph& graph, int64_t num_species,
                                     double cutoff, torch::ScalarType dtype) {
  const int64_t centers = graph.centers.size(0);
  const int64_t width = graph.neighbor_index.size(1);
  const torch::Tensor valid = graph.neighbor_index >= 0;
  const torch::Tensor safe = graph.neighbor_index.clamp_min(0).reshape({-1});
  const torch::Tensor positions = graph.positions.to(dtype);
  const torch::Tensor center_positions = positions.index_select(0, graph.centers);
  const torch::Tensor vectors =
      positions.index_select(0, safe).reshape({centers, width, 3}) - center_positions.unsqueeze(1);
  const torch::Tensor padding =
      torch::tensor({padding_distance(cutoff), 0.0, 0.0}, torch::TensorOptions().dtype(dtype))
          .to(positions.device());
  LocalEnvironments env;
  // where() passes no gradient to the padded rows: the positions gathered there do not count.
  env.pair_vectors = torch::where(valid.unsqueeze(-1), vectors, padding.expand_as(vectors));
  env.neighbor_species = torch::where(valid, graph.species.index_select(0, safe).reshape({centers, width}),
                                      torch::full_like(graph.neighbor_index, num_species));
  env.center_species = graph.species.index_select(0, graph.centers);
  return env;
}

Prediction predict(Potential& potential, const NeighborGraph& graph, const PredictionOptions& options) {
  const bool derivatives = options.forces || options.virial || options.member_forces;
  // Forces are gradients even when the caller runs without gradients (validation, inference).
  torch::AutoGradMode grad_mode(derivatives || torch::GradMode::is_enabled());
  LocalEnvironments env =
      local_environments(graph, potential.num_species(), potential.cutoff(), potential.dtype());
  const int64_t members = potential.committee_size();
  const bool masked = graph.center_energy_mask.defined();
  const torch::Tensor safe = graph.neighbor_index.clamp_min(0).reshape({-1});
  const int64_t atoms = graph.positions.size(0);
  PairGradientOptions gradient_options;
  gradient_options.create_graph = options.create_graph;
  gradient_options.gradient_scale = options.gradient_scale;
  Prediction out;
  auto frame_energies = [&] {
    const torch::Tensor counted = masked ? out.member_atomic_energies * graph.center_energy_mask.to(torch::kFloat64)
                                         : out.member_atomic_energies;
    out.member_energy = torch::zeros({members, graph.num_frames}, out.member_atomic_energies.options())
                            .index_add(1, graph.center_frame, counted);
    out.energy = out.member_energy.mean(0);
  };
  // gradient[.., c, k, :] = dE / d(r_j - r_i): +gradient on the centre, -gradient on the neighbour;
  // [H, C, K, 3] gives [H, atoms, 3].
  auto forces_of = [&](const torch::Tensor& g) {
    const int64_t sets = g.size(0);
    return torch::zeros({sets, atoms, 3}, g.options())
        .index_add(1, graph.centers, g.sum(2))
        .index_add(1, safe, -g.reshape({sets, -1, 3}));
  };
  // W = sum_i x_i f_i = -sum_pairs (r_j - r_i) (x) dE/d(r_j - r_i): [H, frames, 3, 3].
  auto virial_of = [&](const torch::Tensor& vectors, const torch::Tensor& g) {
    torch::Tensor per_center = -torch::einsum("cka,hckb->hcab", {vectors, g});
    if (masked) per_center = per_center * graph.center_energy_mask.to(per_center.scalar_type()).reshape({1, -1, 1, 1});
    return torch::zeros({g.size(0), graph.num_frames, 3, 3}, per_center.options())
        .index_add(1, graph.center_frame, per_center);
  };

  if (options.member_forces) {
    // Every member's own forces: the architecture shares what the members have in common.
    const MemberPairGradients resolved =
        options.shared_member_work ? potential.member_energies_and_pair_gradients(env, gradient_options)
                                   : potential.Potential::member_energies_and_pair_gradients(env, gradient_options);
    out.member_atomic_energies = resolved.atomic_energies;
    frame_energies();
    out.member_forces = forces_of(resolved.pair_gradients);
    out.member_virial = virial_of(env.pair_vectors.detach(), resolved.pair_gradients);
    if (options.forces) out.forces = out.member_forces.mean(0);
    if (options.virial) out.virial = out.member_virial.mean(0);
    return out;
  }

  if (derivatives && !env.pair_vectors.requires_grad()) {
    env.pair_vectors = env.pair_vectors.detach().requires_grad_(true);
  }
  out.member_atomic_energies = potential.member_atomic_energies(env);  // [H, C] float64
  frame_energies();
  if (!derivatives) return out;

  // One backward pass: d(sum of the members' energies of every centre)/d(pair vectors), divided
  // by H (the mean's gradient). Each pair vector belongs to one centre.
  const torch::Tensor gradient =
      energy_gradient(out.member_atomic_energies, env.pair_vectors, gradient_options) *
      (1.0 / static_cast<double>(members));
  if (options.forces) out.forces = forces_of(gradient.unsqueeze(0)).squeeze(0);
  if (options.virial) out.virial = virial_of(env.pair_vectors, gradient.unsqueeze(0)).squeeze(0);
  return out;
}

}  // namespace otf

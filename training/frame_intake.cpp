#include "frame_intake.h"

#include <cstdint>
#include <vector>

namespace otf {

FrameGraph frame_graph(const FramePart& frame, double cutoff) {
  const AtomicSystemView& view = frame.system;
  NeighborGraph graph = neighbor_graph_from_view(view, cutoff);
  std::vector<uint8_t> mask;
  for (int n = 0; n < view.num_centers; ++n)
    if (view.species[view.centers[n]] >= 0) mask.push_back(frame.center_energy_counts[n] ? 1 : 0);
  graph.center_energy_mask =
      torch::tensor(torch::ArrayRef<uint8_t>(mask), torch::kUInt8).to(torch::kBool);
  FrameGraph result;
  result.graph = drop_unused_atoms(graph, &result.kept_atoms);
  if (frame.force_owner == nullptr) return result;

  const int64_t atoms = result.kept_atoms.size(0);
  std::vector<int64_t> graph_index(static_cast<std::size_t>(view.num_atoms), -1);
  const torch::Tensor kept = result.kept_atoms.to(torch::kInt64).contiguous();
  const int64_t* original = kept.data_ptr<int64_t>();
  for (int64_t a = 0; a < atoms; ++a) graph_index[static_cast<std::size_t>(original[a])] = a;
  std::vector<int64_t> owner(static_cast<std::size_t>(atoms));
  for (int64_t a = 0; a < atoms; ++a) {
    const int64_t target = graph_index[static_cast<std::size_t>(frame.force_owner[original[a]])];
    owner[static_cast<std::size_t>(a)] = target >= 0 ? target : a;
  }
  result.force_owner = torch::tensor(owner, torch::kInt64);
  return result;
}

FrameLabels frame_labels(const FramePart& frame, const FrameGraph& graph, bool stress) {
  const AtomicSystemView& view = frame.system;
  FrameLabels labels;
  labels.energy = frame.energy;
  labels.atoms_in_frame = frame.atoms_in_frame;
  torch::Tensor all_forces = torch::zeros({view.num_atoms, 3}, torch::kFloat64);
  if (view.num_local > 0)
    all_forces.narrow(0, 0, view.num_local)
        .copy_(torch::from_blob(const_cast<double*>(frame.owned_forces), {view.num_local, 3},
                                torch::kFloat64));
  labels.forces = all_forces.index_select(0, graph.kept_atoms);
  labels.force_mask = graph.kept_atoms < view.num_local;
  labels.force_owner = graph.force_owner;
  if (stress) {
    const auto& w = frame.virial;
    labels.stress = -torch::tensor({w[0], w[3], w[4], w[3], w[1], w[5], w[4], w[5], w[2]},
                                   torch::kFloat64)
                         .reshape({3, 3}) /
                    frame.volume;
    labels.volume = frame.volume;
  }
  return labels;
}

NeighborGraph owned_centres(const NeighborGraph& graph) {
  const torch::Tensor rows = graph.center_energy_mask.nonzero().squeeze(1);
  NeighborGraph owned = graph;
  owned.centers = graph.centers.index_select(0, rows);
  owned.neighbor_index = graph.neighbor_index.index_select(0, rows);
  owned.center_frame = graph.center_frame.index_select(0, rows);
  owned.center_energy_mask = graph.center_energy_mask.index_select(0, rows);
  return owned;
}

}  // namespace otf

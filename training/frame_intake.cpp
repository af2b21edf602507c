#include "frame_intake.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace otf {

FrameGraph frame_graph(const FramePart& frame, double cutoff, int rank) {
  const AtomicSystemView& view = frame.system;
  NeighborGraph graph = neighbor_graph_from_view(view, cutoff);
  graph.center_energy_mask = torch::ones({graph.centers.size(0)}, torch::kBool);
  FrameGraph result;
  result.graph = drop_unused_atoms(graph, &result.kept_atoms);
  const torch::Tensor kept = result.kept_atoms.to(torch::kInt64).contiguous();
  const int64_t atoms = kept.size(0);
  const int64_t centres = result.graph.centers.size(0);
  const int64_t* original = kept.data_ptr<int64_t>();
  // Owned centres first, in atom order: graph row n is centre n, which the owners' rows name.
  if (!torch::equal(result.graph.centers, torch::arange(centres, torch::kInt64)) ||
      (centres > 0 && original[centres - 1] >= view.num_local)) {
    throw std::invalid_argument("frame_graph: the centres of a frame part must be its owned atoms "
                                "with a species, in atom order");
  }
  std::vector<int64_t> force_owner(static_cast<std::size_t>(atoms));
  std::vector<int64_t> halo_rows, halo_ranks, halo_owner_rows;
  for (int64_t a = 0; a < atoms; ++a) {
    const int64_t atom = original[a];
    if (frame.owner_centre == nullptr) {
      if (atom >= view.num_local)
        throw std::invalid_argument("frame_graph: the frame part has ghost atoms but no owners");
      force_owner[static_cast<std::size_t>(a)] = a;
      continue;
    }
    const int owner_rank = frame.owner_rank != nullptr ? frame.owner_rank[atom] : rank;
    const int64_t owner_centre = frame.owner_centre[atom];
    const bool owned = atom < view.num_local;
    if (owner_centre < 0 || owner_rank < 0 || (owner_rank == rank && owner_centre >= centres) ||
        (owned && (owner_rank != rank || owner_centre != a))) {
      throw std::invalid_argument(
          "frame_graph: atom " + std::to_string(atom) + (owned ? " (owned)" : " (ghost)") +
          " names owner rank " + std::to_string(owner_rank) + " centre " +
          std::to_string(owner_centre) + ", which cannot be its owner (this rank " +
          std::to_string(rank) + " has " + std::to_string(centres) + " centres)");
    }
    if (owner_rank == rank) {
      force_owner[static_cast<std::size_t>(a)] = owner_centre;
    } else {
      force_owner[static_cast<std::size_t>(a)] = a;
      halo_rows.push_back(a);
      halo_ranks.push_back(owner_rank);
      halo_owner_rows.push_back(owner_centre);
    }
  }
  ForceRouting& routing = result.routing;
  routing.force_owner = torch::tensor(force_owner, torch::kInt64);
  routing.halo_rows = torch::tensor(halo_rows, torch::kInt64);
  routing.halo_ranks = torch::tensor(halo_ranks, torch::kInt64);
  routing.halo_owner_rows = torch::tensor(halo_owner_rows, torch::kInt64);
  routing.halo_frames = torch::zeros({static_cast<int64_t>(halo_rows.size())}, torch::kInt64);
  routing.part_atom_offsets = torch::zeros({1}, torch::kInt64);
  return result;
}

std::vector<int> owner_centres(const AtomicSystemView& system, const std::vector<int>& owner_atom) {
  std::vector<int> centre_of_atom(static_cast<std::size_t>(system.num_atoms), -1);
  int centre = 0;
  for (int n = 0; n < system.num_centers; ++n)
    if (system.species[system.centers[n]] >= 0) centre_of_atom[static_cast<std::size_t>(system.centers[n])] = centre++;
  std::vector<int> owners(owner_atom.size(), -1);
  for (std::size_t j = 0; j < owner_atom.size(); ++j)
    if (owner_atom[j] >= 0 && owner_atom[j] < system.num_atoms)
      owners[j] = centre_of_atom[static_cast<std::size_t>(owner_atom[j])];
  return owners;
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
  labels.force_owner = graph.routing.force_owner;
  labels.halo_rows = graph.routing.halo_rows;
  labels.halo_ranks = graph.routing.halo_ranks;
  labels.halo_owner_rows = graph.routing.halo_owner_rows;
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

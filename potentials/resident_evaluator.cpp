#include "resident_evaluator.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "committee_deviation.h"
#include "local_environments.h"

namespace otf {

namespace {

// Entries of the per-chunk totals vector.
constexpr int64_t kEnergy = 0, kVirial = 1, kMaxUncertainty = 7, kPairs = 8, kTotals = 9;

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("ResidentEvaluator: " + message);
}

void check_array(const torch::Tensor& tensor, const char* name, const torch::Device& device,
                 int64_t dims, int64_t min_rows, int64_t columns, bool floating) {
  require(tensor.defined(), std::string(name) + " is missing");
  require(tensor.device() == device, std::string(name) + " is on " + tensor.device().str() +
                                         " but the model is on " + device.str());
  require(tensor.dim() == dims, std::string(name) + " must have " + std::to_string(dims) +
                                    " dimension(s), has " + std::to_string(tensor.dim()));
  require(tensor.size(0) >= min_rows, std::string(name) + " has " + std::to_string(tensor.size(0)) +
                                          " rows for " + std::to_string(min_rows) + " atoms");
  if (columns >= 0) {
    require(tensor.size(1) == columns, std::string(name) + " must have " +
                                           std::to_string(columns) + " columns");
  }
  if (floating) {
    require(tensor.scalar_type() == torch::kFloat64, std::string(name) + " must be float64");
  } else {
    require(!torch::isFloatingType(tensor.scalar_type()) && tensor.scalar_type() != torch::kBool,
            std::string(name) + " must hold integers");
  }
}

}  // namespace

ResidentEvaluator::ResidentEvaluator(std::shared_ptr<Potential> potential, EvaluatorOptions options)
    : potential_(std::move(potential)), options_(options) {
  check_evaluator_options(potential_.get(), options_);
}

EvaluationTotals ResidentEvaluator::evaluate(const ResidentSystem& system,
                                             const ResidentOutputs& outputs) {
  const torch::Device device = potential_->device();
  const int64_t atoms = system.num_atoms;
  require(atoms >= 0, "negative atom count");
  torch::NoGradGuard outer_no_grad;  // enabled per chunk for the force derivatives
  EvaluationTotals totals;
  if (atoms == 0 || !system.centers.defined() || system.centers.numel() == 0) return totals;

  check_array(system.positions, "positions", device, 2, atoms, 3, true);
  check_array(system.types, "types", device, 1, atoms, -1, false);
  check_array(system.species_of_type, "species_of_type", device, 1, 1, -1, false);
  check_array(system.centers, "centers", device, 1, 0, -1, false);
  check_array(system.neighbor_counts, "neighbor_counts", device, 1, 0, -1, false);
  check_array(system.neighbors, "neighbors", device, 2, 0, -1, false);
  if (outputs.forces.defined()) check_array(outputs.forces, "forces", device, 2, atoms, 3, true);
  if (outputs.atom_energy.defined()) check_array(outputs.atom_energy, "atom_energy", device, 1, atoms, -1, true);
  if (outputs.atom_virial.defined()) check_array(outputs.atom_virial, "atom_virial", device, 2, atoms, 6, true);
  if (outputs.atom_energy_uncertainty.defined()) {
    check_array(outputs.atom_energy_uncertainty, "atom_energy_uncertainty", device, 1, atoms, -1, true);
  }

  // Index ranges, checked on the device and read back in one transfer.
  const torch::Tensor types = system.types.narrow(0, 0, atoms).to(torch::kInt64);
  const torch::Tensor centers = system.centers.to(torch::kInt64);
  const int64_t rows = std::min(system.neighbors.size(0), system.neighbor_counts.size(0));
  const torch::Tensor ranges =
      torch::stack({types.min(), types.max(), centers.min(), centers.max()}).cpu();
  const auto* range = ranges.data_ptr<int64_t>();
  require(range[0] >= 0 && range[1] < system.species_of_type.size(0),
          "atom types " + std::to_string(range[0]) + ".." + std::to_string(range[1]) +
              " outside the type map 0.." + std::to_string(system.species_of_type.size(0) - 1));
  require(range[2] >= 0 && range[3] < atoms && range[3] < rows,
          "centre index outside 0.." + std::to_string(std::min(atoms, rows) - 1));

  const torch::Tensor species = system.species_of_type.to(torch::kInt64).index_select(0, types);
  const int64_t species_count = potential_->num_species();
  require(species.max().item<int64_t>() < species_count,
          "the type map names species beyond the model's " + std::to_string(species_count));

  torch::Tensor sums = torch::zeros({kTotals}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  const int64_t num_centers = centers.size(0);
  for (int64_t first = 0; first < num_centers; first += options_.chunk_size) {
    const int64_t count = std::min(options_.chunk_size, num_centers - first);
    const torch::Tensor part = evaluate_chunk(system, species, centers.narrow(0, first, count), outputs);
    const torch::Tensor largest = torch::maximum(sums[kMaxUncertainty], part[kMaxUncertainty]);
    sums.add_(part);
    sums[kMaxUncertainty].copy_(largest);
  }

  const torch::Tensor host = sums.cpu();
  const auto* value = host.data_ptr<double>();
  totals.energy = value[kEnergy];
  for (int64_t v = 0; v < 6; ++v) totals.virial[static_cast<std::size_t>(v)] = value[kVirial + v];
  totals.max_energy_uncertainty = value[kMaxUncertainty];
  totals.pairs_within_cutoff = static_cast<int64_t>(value[kPairs]);
  return totals;
}

torch::Tensor ResidentEvaluator::evaluate_chunk(const ResidentSystem& system, const torch::Tensor& species,
                                                const torch::Tensor& chunk_centers,
                                                const ResidentOutputs& outputs) {
  const torch::Device device = potential_->device();
  const auto long_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const double cutoff = potential_->cutoff();
  const int64_t species_count = potential_->num_species();

  // Centres of ignored species have no energy and are nobody's neighbour.
  const torch::Tensor centers = chunk_centers.masked_select(species.index_select(0, chunk_centers) >= 0);
  const int64_t num_centers = centers.size(0);
  if (num_centers == 0) return torch::zeros({kTotals}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  const torch::Tensor center_species = species.index_select(0, centers);

  // The centres' rows of the list, cut to the longest of them (Kokkos allocates the matrix
  // wider); at least one column keeps every shape non-empty.
  const torch::Tensor counts = system.neighbor_counts.index_select(0, centers).to(torch::kInt64);
  const int64_t longest = std::min(system.neighbors.size(1), counts.max().item<int64_t>());
  torch::Tensor rows =
      system.neighbors.narrow(1, 0, std::max<int64_t>(longest, 0)).index_select(0, centers).to(torch::kInt64);
  if (rows.size(1) == 0) rows = torch::zeros({num_centers, 1}, long_options);
  const int64_t columns = rows.size(1);
  const torch::Tensor in_list = torch::arange(columns, long_options).unsqueeze(0) < counts.unsqueeze(1);
  torch::Tensor neighbor = rows.bitwise_and(system.neighbor_index_mask);
  const bool bad_index =
      (in_list & ((neighbor < 0) | (neighbor >= system.num_atoms))).any().item<bool>();
  require(!bad_index, "neighbour index outside 0.." + std::to_string(system.num_atoms - 1));
  neighbor = torch::where(in_list, neighbor, torch::zeros_like(neighbor));

  // Differences in float64, rounded to the model's dtype afterwards, as the host evaluator does
  // (local_environments rounds positions first, which loses digits at large box coordinates).
  const torch::Tensor flat = neighbor.reshape({-1});
  const torch::Tensor neighbor_species = species.index_select(0, flat).reshape({num_centers, columns});
  const torch::Tensor center_positions = system.positions.index_select(0, centers);
  const torch::Tensor vectors = system.positions.index_select(0, flat).reshape({num_centers, columns, 3}) -
                                center_positions.unsqueeze(1);
  const torch::Tensor within =
      in_list & (neighbor_species >= 0) & (vectors.pow(2).sum(-1) < cutoff * cutoff);

  // Pack each row's neighbours within the cutoff to the front, in list order, and cut the width
  // to the longest row: the host evaluator's padded layout. Slot of an entry: its rank among the
  // row's kept entries; dropped entries all go to a spare last column that is cut off.
  const torch::Tensor rank_in_row = within.cumsum(1) - 1;
  const int64_t width = std::max<int64_t>(1, rank_in_row.select(1, columns - 1).max().item<int64_t>() + 1);
  const torch::Tensor slot = torch::where(within, rank_in_row, torch::full_like(rank_in_row, width));
  auto packed = [&](const torch::Tensor& values) {
    const torch::Tensor index = values.dim() == 3 ? slot.unsqueeze(-1).expand_as(values) : slot;
    std::vector<int64_t> shape = values.sizes().vec();
    shape[1] = width + 1;
    return torch::zeros(shape, values.options()).scatter_(1, index, values).narrow(1, 0, width);
  };
  const torch::Tensor kept = packed(within);
  const torch::Tensor kept_atom = packed(neighbor);
  const torch::Tensor kept_vectors = packed(vectors);
  // Made on the device: no host-to-device transfer per chunk.
  torch::Tensor padding = torch::zeros({3}, kept_vectors.options());
  padding.narrow(0, 0, 1).fill_(padding_distance(cutoff));

  LocalEnvironments env;
  env.pair_vectors = torch::where(kept.unsqueeze(-1), kept_vectors, padding.expand_as(kept_vectors))
                         .to(potential_->dtype());
  env.neighbor_species =
      torch::where(kept, packed(neighbor_species), torch::full_like(kept_atom, species_count));
  env.center_species = center_species;
  env.first_derivatives_only = true;

  torch::AutoGradMode grad_mode(true);
  env.pair_vectors = env.pair_vectors.detach().requires_grad_(true);
  torch::Tensor member_energies;
  {
    // As in the host evaluator: the forward in the run's precision, the backward outside.
    std::optional<AutocastRegion> region;
    if (options_.precision != Precision::Float32) region.emplace(device, options_.precision);
    member_energies = potential_->member_atomic_energies(env);  // [H, C] float64
  }
  const int64_t members = member_energies.size(0);
  const torch::Tensor atomic = member_energies.mean(0).detach();
  const torch::Tensor spread = committee_deviation(member_energies.detach());
  const torch::Tensor gradient =
      torch::autograd::grad({member_energies.sum(0).sum()}, {env.pair_vectors})[0];

  // The committee mean's gradient; padding slots contribute nothing.
  const torch::Tensor pair_gradient =
      (gradient.to(torch::kFloat64) * (1.0 / static_cast<double>(members)))
          .masked_fill(kept.logical_not().unsqueeze(-1), 0.0);
  const torch::Tensor neighbor_rows = kept_atom.reshape({-1});
  if (outputs.forces.defined()) {
    outputs.forces.index_add_(0, centers, pair_gradient.sum(1));
    outputs.forces.index_add_(0, neighbor_rows, pair_gradient.reshape({-1, 3}), /*alpha=*/-1.0);
  }
  // LAMMPS' pair convention: v = (x_i - x_j) (x) f_i with f_i = +g, from the vectors the model
  // saw; W[a][b] = -sum r_a g_b, components xx yy zz xy xz yz.
  const torch::Tensor r = env.pair_vectors.detach().to(torch::kFloat64);
  const torch::Tensor g = pair_gradient;
  const torch::Tensor total_virial = -torch::einsum("cka,ckb->ab", {r, g});
  const torch::Tensor virial_components = torch::stack(
      {total_virial[0][0], total_virial[1][1], total_virial[2][2], total_virial[0][1],
       total_virial[0][2], total_virial[1][2]});
  if (outputs.atom_virial.defined()) {
    auto component = [](const torch::Tensor& t, int64_t a) { return t.select(-1, a); };
    const torch::Tensor half_pair_virial =
        -0.5 * torch::stack({component(r, 0) * component(g, 0), component(r, 1) * component(g, 1),
                             component(r, 2) * component(g, 2), component(r, 0) * component(g, 1),
                             component(r, 0) * component(g, 2), component(r, 1) * component(g, 2)},
                            -1);  // [C, K, 6]
    outputs.atom_virial.index_add_(0, centers, half_pair_virial.sum(1));
    outputs.atom_virial.index_add_(0, neighbor_rows, half_pair_virial.reshape({-1, 6}));
  }
  if (outputs.atom_energy.defined()) outputs.atom_energy.index_add_(0, centers, atomic);
  if (outputs.atom_energy_uncertainty.defined()) outputs.atom_energy_uncertainty.index_add_(0, centers, spread);

  return torch::cat({atomic.sum().reshape({1}), virial_components, spread.max().reshape({1}),
                     kept.sum().to(torch::kFloat64).reshape({1})});
}

}  // namespace otf

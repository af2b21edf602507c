#include "potential_evaluator.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "autocast_region.h"
#include "committee_deviation.h"
#include "local_environments.h"

namespace otf {

void check_evaluator_options(const Potential* potential, const EvaluatorOptions& options) {
  if (potential == nullptr) throw std::invalid_argument("PotentialEvaluator: no potential");
  if (options.chunk_size < 1) {
    throw std::invalid_argument("PotentialEvaluator: chunk size must be >= 1, got " +
                                std::to_string(options.chunk_size));
  }
  if (potential->dtype() == torch::kFloat64 && options.precision != Precision::Float32) {
    throw std::invalid_argument("precision " + to_string(options.precision) +
                                " needs a float32 model; this model's parameters are float64");
  }
}

PotentialEvaluator::PotentialEvaluator(std::shared_ptr<Potential> potential, EvaluatorOptions options)
    : potential_(std::move(potential)), options_(options) {
  check_evaluator_options(potential_.get(), options_);
}

std::size_t PotentialEvaluator::workspace_bytes() const {
  return pair_vectors_double_.capacity() * sizeof(double) +
         pair_vectors_float_.capacity() * sizeof(float) +
         (neighbor_species_.capacity() + center_species_.capacity()) * sizeof(int64_t) +
         (center_atom_.capacity() + neighbor_atom_.capacity() + neighbor_counts_.capacity()) *
             sizeof(int);
}

EvaluationTotals PotentialEvaluator::evaluate(const AtomicSystemView& system,
                                              const EvaluationOutputs& outputs) {
  if (system.num_atoms < 0 || system.num_local < 0 || system.num_local > system.num_atoms ||
      system.num_centers < 0 ||
      (system.num_atoms > 0 && (system.positions == nullptr || system.species == nullptr)) ||
      (system.num_centers > 0 && (system.centers == nullptr || system.neighbor_counts == nullptr ||
                                  system.neighbors == nullptr))) {
    throw std::invalid_argument("PotentialEvaluator: inconsistent atomic system view");
  }
  torch::NoGradGuard outer_no_grad;  // parameters need no gradients here; enabled per chunk below
  EvaluationTotals totals;
  const auto chunk = static_cast<int>(std::min<int64_t>(options_.chunk_size, 1 << 30));
  for (int first = 0; first < system.num_centers; first += chunk) {
    const int count = std::min(chunk, system.num_centers - first);
    const EvaluationTotals part = evaluate_chunk(system, outputs, first, count);
    totals.energy += part.energy;
    for (int v = 0; v < 6; ++v) totals.virial[static_cast<std::size_t>(v)] += part.virial[static_cast<std::size_t>(v)];
    totals.max_energy_uncertainty = std::max(totals.max_energy_uncertainty, part.max_energy_uncertainty);
    totals.pairs_within_cutoff += part.pairs_within_cutoff;
  }
  return totals;
}

void PotentialEvaluator::fill_chunk(const AtomicSystemView& system, int first_center, int count) {
  const double cutoff = potential_->cutoff();
  const double cutoff_sq = cutoff * cutoff;
  const int num_species = static_cast<int>(potential_->num_species());
  const double* x = system.positions;

  // Pass 1: centres of the chunk and their neighbour counts within the cutoff.
  center_atom_.clear();
  neighbor_counts_.clear();
  int max_neighbors = 1;  // at least one (padding) column keeps every shape non-empty
  for (int n = first_center; n < first_center + count; ++n) {
    const int i = system.centers[n];
    if (i < 0 || i >= system.num_atoms) {
      throw std::invalid_argument("neighbour list: centre index " + std::to_string(i) +
                                  " outside 0.." + std::to_string(system.num_atoms - 1));
    }
    const int si = system.species[i];
    if (si < 0) continue;
    if (si >= num_species) {
      throw std::invalid_argument("atom " + std::to_string(i) + " has species " + std::to_string(si) +
                                  " but the model has " + std::to_string(num_species));
    }
    int within = 0;
    const int* list = system.neighbors[n];
    for (int k = 0; k < system.neighbor_counts[n]; ++k) {
      const int j = list[k] & system.neighbor_index_mask;
      if (j < 0 || j >= system.num_atoms) {
        throw std::invalid_argument("neighbour list: neighbour index " + std::to_string(j) +
                                    " outside 0.." + std::to_string(system.num_atoms - 1));
      }
      if (system.species[j] < 0) continue;
      const double dx = x[3 * j] - x[3 * i], dy = x[3 * j + 1] - x[3 * i + 1], dz = x[3 * j + 2] - x[3 * i + 2];
      if (dx * dx + dy * dy + dz * dz < cutoff_sq) ++within;
    }
    center_atom_.push_back(n);  // position in the list, resolved below
    neighbor_counts_.push_back(within);
    max_neighbors = std::max(max_neighbors, within);
  }
  chunk_centers_ = static_cast<int>(center_atom_.size());
  chunk_max_neighbors_ = max_neighbors;

  // Pass 2: padded arrays [centres, K]. Padding rows point beyond the cutoff (their terms are 0).
  const std::size_t slots = static_cast<std::size_t>(chunk_centers_) * static_cast<std::size_t>(max_neighbors);
  const bool single = potential_->dtype() == torch::kFloat32;
  const double pad = padding_distance(cutoff);
  if (single) pair_vectors_float_.resize(3 * slots); else pair_vectors_double_.resize(3 * slots);
  neighbor_species_.assign(slots, num_species);
  neighbor_atom_.assign(slots, -1);
  center_species_.resize(static_cast<std::size_t>(chunk_centers_));
  for (int c = 0; c < chunk_centers_; ++c) {
    const int n = center_atom_[static_cast<std::size_t>(c)];
    const int i = system.centers[n];
    center_atom_[static_cast<std::size_t>(c)] = i;
    center_species_[static_cast<std::size_t>(c)] = system.species[i];
    const std::size_t row = static_cast<std::size_t>(c) * static_cast<std::size_t>(max_neighbors);
    std::size_t filled = 0;
    const int* list = system.neighbors[n];
    for (int k = 0; k < system.neighbor_counts[n]; ++k) {
      const int j = list[k] & system.neighbor_index_mask;
      if (system.species[j] < 0) continue;
      const double dx = x[3 * j] - x[3 * i], dy = x[3 * j + 1] - x[3 * i + 1], dz = x[3 * j + 2] - x[3 * i + 2];
      if (dx * dx + dy * dy + dz * dz >= cutoff_sq) continue;
      const std::size_t slot = row + filled++;
      if (single) {
        pair_vectors_float_[3 * slot] = static_cast<float>(dx);
        pair_vectors_float_[3 * slot + 1] = static_cast<float>(dy);
        pair_vectors_float_[3 * slot + 2] = static_cast<float>(dz);
      } else {
        pair_vectors_double_[3 * slot] = dx;
        pair_vectors_double_[3 * slot + 1] = dy;
        pair_vectors_double_[3 * slot + 2] = dz;
      }
      neighbor_species_[slot] = system.species[j];
      neighbor_atom_[slot] = j;
    }
    for (std::size_t slot = row + filled; slot < row + static_cast<std::size_t>(max_neighbors); ++slot) {
      if (single) {
        pair_vectors_float_[3 * slot] = static_cast<float>(pad);
        pair_vectors_float_[3 * slot + 1] = pair_vectors_float_[3 * slot + 2] = 0.0F;
      } else {
        pair_vectors_double_[3 * slot] = pad;
        pair_vectors_double_[3 * slot + 1] = pair_vectors_double_[3 * slot + 2] = 0.0;
      }
    }
  }
}

namespace {

// Adds one chunk's pair gradients to forces and virials. gradient[c][k] = dE/d(r_j - r_i).
template <typename Real>
void scatter_pair_gradients(const Real* gradient, const Real* vectors, const std::vector<int>& center_atom,
                            const std::vector<int>& neighbor_atom, const std::vector<int>& counts,
                            int max_neighbors, double scale, double* forces, double* atom_virial,
                            std::array<double, 6>* virial) {
  for (std::size_t c = 0; c < center_atom.size(); ++c) {
    const int i = center_atom[c];
    const std::size_t row = c * static_cast<std::size_t>(max_neighbors);
    for (int k = 0; k < counts[c]; ++k) {
      const std::size_t slot = row + static_cast<std::size_t>(k);
      const int j = neighbor_atom[slot];
      const double gx = scale * gradient[3 * slot], gy = scale * gradient[3 * slot + 1], gz = scale * gradient[3 * slot + 2];
      if (forces != nullptr) {
        forces[3 * i] += gx; forces[3 * i + 1] += gy; forces[3 * i + 2] += gz;
        forces[3 * j] -= gx; forces[3 * j + 1] -= gy; forces[3 * j + 2] -= gz;
      }
      if (virial == nullptr && atom_virial == nullptr) continue;
      const double rx = vectors[3 * slot], ry = vectors[3 * slot + 1], rz = vectors[3 * slot + 2];
      // LAMMPS' pair convention (ev_tally_xyz): v = (x_i - x_j) (x) f_i with f_i = +g.
      const double v[6] = {-rx * gx, -ry * gy, -rz * gz, -rx * gy, -rx * gz, -ry * gz};
      if (virial != nullptr) for (int a = 0; a < 6; ++a) (*virial)[static_cast<std::size_t>(a)] += v[a];
      if (atom_virial != nullptr) {
        for (int a = 0; a < 6; ++a) {
          atom_virial[6 * i + a] += 0.5 * v[a];
          atom_virial[6 * j + a] += 0.5 * v[a];
        }
      }
    }
  }
}

}  // namespace

EvaluationTotals PotentialEvaluator::evaluate_chunk(const AtomicSystemView& system,
                                                    const EvaluationOutputs& outputs,
                                                    int first_center, int count) {
  fill_chunk(system, first_center, count);
  EvaluationTotals totals;
  if (chunk_centers_ == 0) return totals;
  const bool single = potential_->dtype() == torch::kFloat32;
  const int64_t centers = chunk_centers_, width = chunk_max_neighbors_;
  void* vector_data = single ? static_cast<void*>(pair_vectors_float_.data())
                             : static_cast<void*>(pair_vectors_double_.data());
  // Host arrays; a model on a GPU (moved there by a training) gets copies of them.
  const torch::Device device = potential_->device();
  LocalEnvironments env;
  env.pair_vectors = torch::from_blob(vector_data, {centers, width, 3},
                                      single ? torch::kFloat32 : torch::kFloat64).to(device);
  env.neighbor_species = torch::from_blob(neighbor_species_.data(), {centers, width}, torch::kInt64).to(device);
  env.center_species = torch::from_blob(center_species_.data(), {centers}, torch::kInt64).to(device);
  env.first_derivatives_only = true;  // forces and virials only

  torch::AutoGradMode grad_mode(true);
  env.pair_vectors.requires_grad_(true);
  torch::Tensor member_energies;
  {
    // Forward (descriptor, networks) in the run's precision; the backward below runs outside
    // the region, as PyTorch prescribes (docs/design.md §7.7).
    std::optional<AutocastRegion> region;
    if (options_.precision != Precision::Float32) region.emplace(device, options_.precision);
    member_energies = potential_->member_atomic_energies(env);  // [H, C] float64
  }
  const int64_t members = member_energies.size(0);
  const torch::Tensor atomic = member_energies.mean(0).detach().cpu();
  const bool want_uncertainty = outputs.atom_energy_uncertainty != nullptr;
  const torch::Tensor spread = committee_deviation(member_energies.detach()).cpu();

  const auto* energy = atomic.data_ptr<double>();
  const auto* deviation = spread.data_ptr<double>();
  for (int64_t c = 0; c < centers; ++c) {
    const int i = center_atom_[static_cast<std::size_t>(c)];
    totals.energy += energy[c];
    totals.max_energy_uncertainty = std::max(totals.max_energy_uncertainty, deviation[c]);
    totals.pairs_within_cutoff += neighbor_counts_[static_cast<std::size_t>(c)];
    if (outputs.atom_energy != nullptr) outputs.atom_energy[i] += energy[c];
    if (want_uncertainty) outputs.atom_energy_uncertainty[i] += deviation[c];
  }

  auto scatter = [&](const torch::Tensor& gradient, double scale, double* forces, double* atom_virial,
                     std::array<double, 6>* virial) {
    const torch::Tensor g = gradient.cpu().contiguous();
    if (single) {
      scatter_pair_gradients(g.data_ptr<float>(), pair_vectors_float_.data(), center_atom_, neighbor_atom_,
                             neighbor_counts_, chunk_max_neighbors_, scale, forces, atom_virial, virial);
    } else {
      scatter_pair_gradients(g.data_ptr<double>(), pair_vectors_double_.data(), center_atom_, neighbor_atom_,
                             neighbor_counts_, chunk_max_neighbors_, scale, forces, atom_virial, virial);
    }
  };

  if (outputs.member_forces != nullptr) {
    // The committee mean's forces are the mean of the members' (forces are linear in energy).
    const std::size_t stride = static_cast<std::size_t>(system.num_atoms) * 3;
    for (int64_t h = 0; h < members; ++h) {
      const torch::Tensor gradient = torch::autograd::grad(
          {member_energies[h].sum()}, {env.pair_vectors}, {}, /*retain_graph=*/true)[0];
      scatter(gradient, 1.0, outputs.member_forces + static_cast<std::size_t>(h) * stride, nullptr, nullptr);
      scatter(gradient, 1.0 / static_cast<double>(members), outputs.forces, outputs.atom_virial, &totals.virial);
    }
  } else {
    const torch::Tensor gradient =
        torch::autograd::grad({member_energies.sum(0).sum()}, {env.pair_vectors})[0];
    scatter(gradient, 1.0 / static_cast<double>(members), outputs.forces, outputs.atom_virial, &totals.virial);
  }
  return totals;
}

}  // namespace otf

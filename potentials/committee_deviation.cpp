#include "committee_deviation.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace otf {

torch::Tensor committee_deviation(const torch::Tensor& member_values) {
  if (member_values.dim() < 1 || member_values.size(0) < 1)
    throw std::invalid_argument("committee_deviation: expected [members, ...] with members >= 1");
  return member_values.std(0, /*unbiased=*/false);
}

torch::Tensor committee_vector_deviation(const torch::Tensor& member_vectors) {
  if (member_vectors.dim() < 2 || member_vectors.size(0) < 1)
    throw std::invalid_argument(
        "committee_vector_deviation: expected [members, ..., components] with members >= 1");
  return (member_vectors - member_vectors.mean(0, /*keepdim=*/true)).pow(2).sum(-1).mean(0).sqrt();
}

std::vector<double> committee_spread_sums(const double* per_atom_spread, int64_t atoms,
                                          const torch::Tensor& member_energies, int64_t members) {
  std::vector<double> sums(2 + static_cast<size_t>(std::max<int64_t>(members, 0)), 0.0);
  for (int64_t i = 0; i < atoms; ++i) sums[0] += per_atom_spread[i] * per_atom_spread[i];
  sums[1] = static_cast<double>(atoms);
  if (member_energies.defined()) {
    const torch::Tensor energies =
        member_energies.detach().to(torch::kFloat64).cpu().reshape({-1}).contiguous();
    for (int64_t k = 0; k < std::min<int64_t>(members, energies.numel()); ++k)
      sums[2 + static_cast<size_t>(k)] = energies.data_ptr<double>()[k];
  }
  return sums;
}

CommitteeFrameSpread committee_frame_spread(const double* totals, int64_t members,
                                            int64_t atoms_in_frame) {
  CommitteeFrameSpread spread;
  spread.mean_square_force_spread = totals[1] > 0.0 ? totals[0] / totals[1] : 0.0;
  double energy_sum = 0.0, energy_sq = 0.0;
  for (int64_t k = 0; k < members; ++k) energy_sum += totals[2 + k];
  const double member_count = static_cast<double>(std::max<int64_t>(members, 1));
  spread.mean_energy = energy_sum / member_count;
  for (int64_t k = 0; k < members; ++k)
    energy_sq += (totals[2 + k] - spread.mean_energy) * (totals[2 + k] - spread.mean_energy);
  const double atoms =
      atoms_in_frame > 0 ? static_cast<double>(atoms_in_frame) : std::max(totals[1], 1.0);
  spread.energy_spread_per_atom = std::sqrt(energy_sq / member_count) / atoms;
  return spread;
}

}  // namespace otf

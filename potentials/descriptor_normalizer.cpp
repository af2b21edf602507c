#include "descriptor_normalizer.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace otf {
namespace {
// A feature that hardly varies in the data (a perfect crystal's first frames) is scaled by at
// least this fraction of its root mean square, so that small displacements later do not become
// huge network inputs.
constexpr double kRelativeScaleFloor = 0.05;
// A feature that is zero in every frame seen, as symmetry makes some angular features of a
// perfect lattice (the l = 1 sum of a tetrahedral or centrosymmetric site), has no scale of its
// own: one below kDegenerateFeature times the root mean square of all the species' features is
// scaled by kSpeciesScaleFloor times that instead, so that the first thermal displacements give
// inputs of order one instead of 1e4 (docs/potentials.md, item 4). Features with any spread of
// their own keep their own scale: small ones carry real signal (forces, stress).
constexpr double kDegenerateFeature = 1e-6;
constexpr double kSpeciesScaleFloor = 0.01;
constexpr double kAbsoluteScaleFloor = 1e-6;
}  // namespace

DescriptorNormalizer::DescriptorNormalizer(int64_t num_species, int64_t num_features,
                                           torch::ScalarType dtype) {
  const auto wide = torch::TensorOptions().dtype(torch::kFloat64);
  count_ = register_buffer("count", torch::zeros({num_species}, wide));
  sum_ = register_buffer("sum", torch::zeros({num_species, num_features}, wide));
  sum_sq_ = register_buffer("sum_sq", torch::zeros({num_species, num_features}, wide));
  mean_ = register_buffer("mean", torch::zeros({num_species, num_features}, dtype));
  inverse_scale_ = register_buffer("inverse_scale", torch::ones({num_species, num_features}, dtype));
  frozen_ = register_buffer("frozen", torch::zeros({}, torch::kBool));
}

torch::Tensor DescriptorNormalizer::forward(const torch::Tensor& features,
                                            const torch::Tensor& species) const {
  if (mean_.size(0) == 1) return (features - mean_[0]) * inverse_scale_[0];
  return (features - mean_.index_select(0, species)) * inverse_scale_.index_select(0, species);
}

DescriptorMoments DescriptorNormalizer::moments(const torch::Tensor& features,
                                                const torch::Tensor& species) const {
  torch::NoGradGuard no_grad;
  const torch::Tensor wide = features.detach().to(torch::kFloat64);
  DescriptorMoments moments;
  moments.count = torch::zeros_like(count_).index_add(
      0, species, torch::ones_like(species, torch::kFloat64));
  moments.sum = torch::zeros_like(sum_).index_add(0, species, wide);
  moments.sum_sq = torch::zeros_like(sum_sq_).index_add(0, species, wide * wide);
  return moments;
}

void DescriptorNormalizer::accumulate(const DescriptorMoments& moments) {
  if (frozen()) return;
  if (!moments.count.sizes().equals(count_.sizes()) || !moments.sum.sizes().equals(sum_.sizes()) ||
      !moments.sum_sq.sizes().equals(sum_sq_.sizes())) {
    throw std::invalid_argument("descriptor statistics: moments of the wrong shape");
  }
  torch::NoGradGuard no_grad;
  count_.add_(moments.count.to(count_.options()));
  sum_.add_(moments.sum.to(sum_.options()));
  sum_sq_.add_(moments.sum_sq.to(sum_sq_.options()));
  update_mean_and_scale();
}

DescriptorNormalizer::RunningMoments DescriptorNormalizer::running_moments() const {
  const torch::Tensor count = count_.clamp_min(1.0).unsqueeze(-1);
  RunningMoments m;
  m.mean = sum_ / count;
  m.mean_square = sum_sq_ / count;
  m.variance = (m.mean_square - m.mean * m.mean).clamp_min(0.0);
  m.species_rms = m.mean_square.mean(-1, /*keepdim=*/true).sqrt();
  return m;
}

torch::Tensor DescriptorNormalizer::running_scale(const RunningMoments& m) {
  const torch::Tensor own_floor = kRelativeScaleFloor * m.mean_square.sqrt() + kAbsoluteScaleFloor;
  const torch::Tensor degenerate = m.mean_square.sqrt() <= kDegenerateFeature * m.species_rms;
  const torch::Tensor floor =
      torch::where(degenerate, torch::maximum(own_floor, kSpeciesScaleFloor * m.species_rms),
                   own_floor);
  return (m.variance + floor * floor).sqrt();
}

void DescriptorNormalizer::update_mean_and_scale() {
  const torch::Tensor seen = (count_ > 0).unsqueeze(-1);
  const RunningMoments running = running_moments();
  const torch::Tensor& mean = running.mean;
  const torch::Tensor scale = running_scale(running);
  mean_.copy_(torch::where(seen, mean, torch::zeros_like(mean)));
  inverse_scale_.copy_(torch::where(seen, 1.0 / scale, torch::ones_like(scale)));
}

double DescriptorNormalizer::spread_ratio(const DescriptorMoments& frame) const {
  torch::NoGradGuard no_grad;
  const torch::Tensor frame_count = frame.count.to(count_.options());
  const torch::Tensor in_frame = frame_count > 0;
  if (!in_frame.any().item<bool>()) return 1.0;
  if ((in_frame & (count_ <= 0)).any().item<bool>()) return std::numeric_limits<double>::infinity();
  // Against the spread actually seen, without the scale's floors: those would make the first,
  // still nearly identical frames of a perfect crystal look representative. A feature is
  // degenerate below kDegenerateFeature x the species' feature RMS (zero in every frame, as for
  // an element pair absent from the system).
  const RunningMoments running = running_moments();
  const torch::Tensor& mean = running.mean;
  const torch::Tensor least = (kDegenerateFeature * running.species_rms).square() + 1e-300;
  const torch::Tensor n = frame_count.clamp_min(1.0).unsqueeze(-1);
  const torch::Tensor sum = frame.sum.to(sum_.options());
  const torch::Tensor sum_sq = frame.sum_sq.to(sum_sq_.options());
  // Mean over the frame's atoms of (x - mean)^2, from its sums.
  const torch::Tensor deviation = ((sum_sq - 2.0 * mean * sum) / n + mean * mean).clamp_min(0.0);
  const torch::Tensor ratios =
      (torch::where(deviation <= least, torch::zeros_like(deviation),
                    deviation / torch::maximum(running.variance, least)))
          .index({in_frame});
  return std::sqrt(ratios.mean().item<double>());
}

void DescriptorNormalizer::freeze() { frozen_.fill_(true); }

}  // namespace otf

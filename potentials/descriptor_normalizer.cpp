#include "descriptor_normalizer.h"

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

void DescriptorNormalizer::update_mean_and_scale() {
  const torch::Tensor seen = (count_ > 0).unsqueeze(-1);
  const torch::Tensor count = count_.clamp_min(1.0).unsqueeze(-1);
  const torch::Tensor mean = sum_ / count;
  const torch::Tensor mean_square = sum_sq_ / count;
  const torch::Tensor variance = (mean_square - mean * mean).clamp_min(0.0);
  const torch::Tensor species_rms = mean_square.mean(-1, /*keepdim=*/true).sqrt();
  const torch::Tensor own_floor = kRelativeScaleFloor * mean_square.sqrt() + kAbsoluteScaleFloor;
  const torch::Tensor degenerate = mean_square.sqrt() <= kDegenerateFeature * species_rms;
  const torch::Tensor floor =
      torch::where(degenerate, torch::maximum(own_floor, kSpeciesScaleFloor * species_rms),
                   own_floor);
  const torch::Tensor scale = (variance + floor * floor).sqrt();
  mean_.copy_(torch::where(seen, mean, torch::zeros_like(mean)));
  inverse_scale_.copy_(torch::where(seen, 1.0 / scale, torch::ones_like(scale)));
}

void DescriptorNormalizer::freeze() { frozen_.fill_(true); }

}  // namespace otf

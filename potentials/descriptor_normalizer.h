// Per-element standardisation of descriptor features, (x - mean) / scale, from running sums over
// the labelled data; frozen on request so that a trained network keeps its input scale. The sums
// are float64 and additive, so MPI ranks add theirs before accumulating and stay identical.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "potential.h"

namespace otf {

class DescriptorNormalizer : public torch::nn::Module {
 public:
  DescriptorNormalizer(int64_t num_species, int64_t num_features, torch::ScalarType dtype);

  // features [atoms, features], species [atoms] int64: standardised features, same dtype.
  torch::Tensor forward(const torch::Tensor& features, const torch::Tensor& species) const;

  // Moments of `features` grouped by `species` (no gradient), float64.
  DescriptorMoments moments(const torch::Tensor& features, const torch::Tensor& species) const;
  // Adds the moments and recomputes mean and scale; ignored when frozen.
  void accumulate(const DescriptorMoments& moments);
  // How much wider than the statistics gathered so far a frame's features spread: the root of
  // the mean, over the features of the species seen, of the frame's mean square deviation from
  // the running mean divided by the running variance (features zero in every frame left out). About 1 (or less) for a frame like
  // those seen; above while the distribution still widens, as when a perfect crystal warms up.
  // Infinite before any statistics, or when the frame has a species not seen yet.
  double spread_ratio(const DescriptorMoments& frame) const;
  void freeze();
  bool frozen() const { return frozen_.item<bool>(); }
  // Atoms seen per species.
  torch::Tensor counts() const { return count_; }

 private:
  void update_mean_and_scale();
  // From the running sums, float64 [species, features] (species_rms: [species, 1], the root mean
  // square of all the species' features).
  struct RunningMoments {
    torch::Tensor mean, mean_square, variance, species_rms;
  };
  RunningMoments running_moments() const;
  // The standardisation scale: the spread with its floors.
  static torch::Tensor running_scale(const RunningMoments& moments);

  torch::Tensor count_, sum_, sum_sq_;  // float64 running sums
  torch::Tensor mean_, inverse_scale_;  // [species, features], the model's parameter dtype
  torch::Tensor frozen_;                // 0-d bool
};

}  // namespace otf

#include "radial_basis.h"

#include <stdexcept>
#include <vector>

namespace otf {
namespace {

torch::Tensor reduced_distance(const torch::Tensor& distances, double cutoff) {
  // Clamped at 1: beyond the cutoff every function below is constant, so its gradient is 0.
  return torch::clamp_max(distances / cutoff, 1.0);
}

torch::Tensor smooth_step_down(const torch::Tensor& x) {
  // 1 - (10 x^3 - 15 x^4 + 6 x^5): the quintic smoothstep, C2 at both ends.
  return 1.0 - x * x * x * (10.0 + x * (-15.0 + 6.0 * x));
}

}  // namespace

torch::Tensor smooth_cutoff(const torch::Tensor& distances, double cutoff) {
  return smooth_step_down(reduced_distance(distances, cutoff));
}

torch::Tensor chebyshev_radial_basis(const torch::Tensor& distances, double cutoff, int64_t count) {
  if (count < 1) throw std::invalid_argument("chebyshev_radial_basis: count must be >= 1");
  const torch::Tensor x = reduced_distance(distances, cutoff);
  const torch::Tensor envelope = smooth_step_down(x);
  const torch::Tensor y = 2.0 * x - 1.0;
  std::vector<torch::Tensor> polynomials;
  polynomials.reserve(static_cast<std::size_t>(count));
  polynomials.push_back(torch::ones_like(y));
  if (count > 1) polynomials.push_back(y);
  for (int64_t k = 2; k < count; ++k) {
    polynomials.push_back(2.0 * y * polynomials[static_cast<std::size_t>(k - 1)] -
                          polynomials[static_cast<std::size_t>(k - 2)]);
  }
  return torch::stack(polynomials, -1) * envelope.unsqueeze(-1);
}

}  // namespace otf

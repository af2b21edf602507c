// Smooth radial functions shared by descriptors: a cutoff function whose value and first two
// derivatives vanish at the cutoff (so forces and their parameter gradients are continuous when a
// neighbour crosses it), and a Chebyshev basis on [0, cutoff] multiplied by it.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace otf {

// f(x) = 1 - 10 x^3 + 15 x^4 - 6 x^5 with x = min(r / cutoff, 1): f(0) = 1, f(1) = f'(1) =
// f''(1) = 0. Beyond the cutoff the value and gradient are exactly 0.
torch::Tensor smooth_cutoff(const torch::Tensor& distances, double cutoff);

// [..., count]: T_k(2 x - 1) f(x) for k = 0 .. count-1 (Chebyshev polynomials of the first kind),
// as in MTP/ACE radial bases; count >= 1.
torch::Tensor chebyshev_radial_basis(const torch::Tensor& distances, double cutoff, int64_t count);

}  // namespace otf

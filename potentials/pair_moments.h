// The pair part of the three-body descriptor: moments of a centre's neighbourhood,
//   M[c][s * radial + k][m] = sum_j [species_j = s] phi_k(r_cj) b_m(u_cj),
// with phi_k the Chebyshev radial basis times the smooth cutoff (radial_basis.h) and b_m the
// Cartesian monomials of the unit vector u of degree <= max_degree, weighted by the square roots
// of their multinomial coefficients (so sum_m within degree l of b_m(u) b_m(v) = (u . v)^l).
//
// Two implementations of the same function: a composition of LibTorch ops (differentiable any
// number of times: training takes the gradient of forces) and a fused loop over pairs with a
// hand-written first derivative, for MD, where forces are the only derivative taken. The fused one
// does one pass over the pairs instead of some forty tensor operations each way.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace otf {

struct PairMomentsShape {
  int64_t num_species = 1;
  double cutoff = 5.0;
  int64_t radial_functions = 8;
  int64_t max_degree = 3;  // 0..3
};

// Number of monomials of degree <= max_degree: 1, 4, 10, 20.
int64_t monomial_count(int64_t max_degree);
// Number of monomials of exactly `degree`, and where they start in the monomial axis.
int64_t monomials_of_degree(int64_t degree);
int64_t first_monomial_of_degree(int64_t degree);

// pair_vectors [C, K, 3], neighbor_species [C, K] (padding rows: beyond the cutoff, species =
// num_species): [C, num_species * radial_functions, monomial_count] in pair_vectors' dtype.
torch::Tensor pair_moments(const torch::Tensor& pair_vectors, const torch::Tensor& neighbor_species,
                           const PairMomentsShape& shape);
// The same values; backward gives d/d(pair_vectors) but cannot itself be differentiated.
// float32 and float64.
torch::Tensor pair_moments_first_order(const torch::Tensor& pair_vectors,
                                       const torch::Tensor& neighbor_species,
                                       const PairMomentsShape& shape);

}  // namespace otf

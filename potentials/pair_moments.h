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

// The two factors of every pair's term in the moments, M[c] = sum_k channels[c,k]^T monomials[c,k],
// and their derivatives with respect to the pair vector v, as plain tensors (no autograd). With
// them the gradient of any function of the moments follows from its gradient G with respect to
// the moments by the chain rule, pair by pair:
//   d/dv_ck = (sum_{j,m} G_jm slope_j b_m) u + sum_m (sum_j G_jm channel_j) db_m/dv,
// for many G at once (pair_gradients_from_moment_gradients). Training gives every committee member
// its own forces this way from one pass over the pairs (docs/design.md §6.7).
struct PairBasis {
  torch::Tensor channels;            // [C, K, S*R]: [species = s] phi_k(r); 0 on padding rows
  torch::Tensor channel_slopes;      // [C, K, S*R]: d channels / d r
  torch::Tensor monomials;           // [C, K, N]: b_m(u), u = v / r
  torch::Tensor monomial_gradients;  // [C, K, N, 3]: d b_m(v / |v|) / d v; 0 on padding rows
  torch::Tensor units;               // [C, K, 3]: u; 0 on padding rows
};
// pair_vectors [C, K, 3] float32 or float64 (read without gradient), neighbor_species [C, K].
PairBasis pair_basis(const torch::Tensor& pair_vectors, const torch::Tensor& neighbor_species,
                     const PairMomentsShape& shape);
// [C, S*R, N]: the moments (pair_moments' values).
torch::Tensor moments_from_basis(const PairBasis& basis);
// moment_gradients [H, C, S*R, N] (H sets of gradients, e.g. one per committee member):
// [H, C, K, 3], the gradients with respect to the pair vectors. Linear in moment_gradients and
// differentiable with respect to them (a training loss on forces reaches the parameters).
torch::Tensor pair_gradients_from_moment_gradients(const PairBasis& basis,
                                                   const torch::Tensor& moment_gradients);

}  // namespace otf

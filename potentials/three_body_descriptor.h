// The default descriptor: species-resolved two-body (radial) and three-body (angular) terms of a
// centre's neighbourhood, in the Behler-Parrinello family, computed without enumerating triplets.
//
// With radial functions phi_k (radial_basis.h), neighbour species s_j and unit vectors u_ij,
// the moments M[s,k][c] = sum_j delta(s_j, s) phi_k(r_ij) b_c(u_ij), where b_c runs over the
// Cartesian monomials of u of degree l <= max_angular_order (weighted by the square roots of the
// multinomial coefficients), give
//   radial features   G[s,k]           = M[s,k][degree 0]        = sum_j phi_k(r_ij) [s_j = s]
//   angular features  A[l][(s,k),(s',k')] = sum_{c of degree l} M[s,k][c] M[s',k'][c]
//                                       = sum_{j,j'} phi_k(r_ij) phi_k'(r_ij') (u_ij . u_ij')^l
// for pairs (s,k) <= (s',k') with k, k' < angular_radial_functions: the three-body sums over
// cos(theta_jij')^l that Behler's angular functions (1 + lambda cos theta)^zeta expand into.
// Cost is linear in the neighbour count; the moments and the pair contractions are batched matrix
// products. They run in the input's precision also inside an autocast region: they are many small
// products (a few by some tens per centre) that a lower precision makes slower on a CPU, not
// faster, and the moments are sums over neighbours that bfloat16 would round to three digits
// (docs/bench-training-step.md has the profile). The networks take the lower precision.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>

#include "local_environments.h"
#include "pair_moments.h"

namespace otf {

struct ThreeBodyDescriptorOptions {
  int64_t num_species = 1;
  double cutoff = 5.0;
  int64_t radial_functions = 8;          // k = 0 .. radial_functions-1 for the radial features
  int64_t angular_radial_functions = 4;  // first k used in the angular features
  int64_t max_angular_order = 3;         // l = 1 .. max_angular_order (at most 3)

  // Reads "radial_functions" (1..32), "angular_radial_functions" (0..radial_functions),
  // "max_angular_order" (0..3); absent keys keep their defaults, other keys are the caller's.
  // std::invalid_argument names a bad value.
  static ThreeBodyDescriptorOptions from_json(const nlohmann::json& json, int64_t num_species,
                                              double cutoff);
  nlohmann::json to_json() const;
};

class ThreeBodyDescriptor {
 public:
  explicit ThreeBodyDescriptor(ThreeBodyDescriptorOptions options);

  // [centres, num_features()] in the dtype of env.pair_vectors (or the autocast dtype of the
  // matrix products); differentiable twice.
  torch::Tensor operator()(const LocalEnvironments& env) const;
  // The features of given moments [centres, S x radial, monomials] (pair_moments.h); the
  // descriptor is features_from_moments(pair moments of env).
  torch::Tensor features_from_moments(const torch::Tensor& moments) const;

  const PairMomentsShape& moments_shape() const { return moments_shape_; }

  int64_t num_features() const { return num_features_; }
  const ThreeBodyDescriptorOptions& options() const { return options_; }

 private:
  ThreeBodyDescriptorOptions options_;
  PairMomentsShape moments_shape_;
  int64_t num_features_ = 0;
  // Host index tensors, not buffers (model files keep their keys); copied to the features'
  // device where they are used (a no-op on the CPU).
  torch::Tensor angular_channels_;     // [angular channels] indices into species x radial
  torch::Tensor pair_rows_;  // flat indices of the upper triangle of angular channel pairs
};

}  // namespace otf

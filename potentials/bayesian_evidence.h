// Bayesian linear regression of energies and forces in closed form, from its normal equations:
// the posterior of weights w under a Gaussian prior w ~ N(0, 1/alpha) (on the penalised columns)
// and Gaussian noise of precision beta_F on force components and beta_E on per-atom energies,
//   A = alpha I' + beta_F G_F + beta_E G_E,  mean = A^-1 (beta_F b_F + beta_E b_E),
// with alpha and beta_F maximising the evidence (MacKay's fixed point) and the per-atom energy
// noise pulled towards force noise x energy_length by one pseudo-observation (a frame's energy is
// one number; with one or two frames the evidence alone cannot estimate its noise). Nothing to
// tune per system. Used by the Bayesian learners (bayesian_descriptor_regression.h,
// bayesian_linear_potential.h); docs/bayesian-learner.md.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace otf {

// Sums over labelled rows, additive (MPI ranks add theirs): G = X^T X, b = X^T y, y.y and the
// number of rows, for force components and for per-atom energies.
struct NormalEquations {
  explicit NormalEquations(int64_t parameters);
  torch::Tensor gram_force, gram_energy;      // [P, P] float64
  torch::Tensor moment_force, moment_energy;  // [P] float64
  double squares_force = 0.0, squares_energy = 0.0;
  double count_force = 0.0, count_energy = 0.0;
  int64_t parameters() const { return moment_force.size(0); }
};

struct EvidenceOptions {
  // Length (A) that relates the prior on the per-atom energy noise to the force noise.
  double energy_length = 0.01;
  int evidence_iterations = 50;
};

struct BayesianPosterior {
  torch::Tensor mean;        // [P] float64
  torch::Tensor covariance;  // [P, P] float64, A^-1
  double prior_precision = 1.0;
  double force_noise_precision = 1.0;
  double energy_noise_precision = 1.0;
};

// penalised [P] float64 of 1 (under the prior) or 0 (a bias: a weak prior only, so that an
// element without labelled atoms keeps a defined zero). Throws std::invalid_argument for
// equations without force or energy rows.
BayesianPosterior maximise_evidence(const NormalEquations& equations,
                                    const torch::Tensor& penalised, const EvidenceOptions& options);

}  // namespace otf

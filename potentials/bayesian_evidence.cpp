#include "bayesian_evidence.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace otf {
namespace {

// Weak prior precision (eV^-2) on a bias: the energy zero is the data's, not the prior's.
constexpr double kBiasPrecision = 1e-6;
// Bounds that keep A positive definite when a target is fitted exactly (force noise of 1e-5 eV/A,
// weights of standard deviation 1e5 in standardised units).
constexpr double kMaxNoisePrecision = 1e10;
constexpr double kMinPriorPrecision = 1e-10;

struct Solved {
  torch::Tensor mean, covariance;
};

Solved solve(const NormalEquations& e, const torch::Tensor& penalised, double alpha,
             double beta_force, double beta_energy) {
  const torch::Tensor prior = penalised * alpha + (1.0 - penalised) * kBiasPrecision;
  const torch::Tensor precision =
      e.gram_force * beta_force + e.gram_energy * beta_energy + torch::diag(prior);
  // Exact labels drive the noise precision to its bound and leave A's eigenvalues twenty orders
  // apart; a jitter of rounding size (relative to A's largest diagonal) keeps it factorisable.
  const double largest = precision.diagonal().max().item<double>();
  torch::Tensor factor;
  for (double jitter = 0.0; !factor.defined();
       jitter = jitter == 0.0 ? 1e-14 * largest : 10.0 * jitter) {
    if (jitter > 1e-6 * largest)
      throw std::runtime_error("Bayesian regression: the posterior precision is not positive "
                               "definite (labels that are not finite?)");
    const auto [candidate, info] = torch::linalg_cholesky_ex(
        jitter == 0.0 ? precision
                      : precision + jitter * torch::eye(precision.size(0), torch::kFloat64));
    if (info.item<int64_t>() == 0) factor = candidate;
  }
  Solved out;
  out.mean = torch::cholesky_solve(
                 (e.moment_force * beta_force + e.moment_energy * beta_energy).unsqueeze(1), factor)
                 .squeeze(1);
  out.covariance = torch::cholesky_inverse(factor);
  return out;
}

// |y - X m|^2 from the normal equations.
double residual(const torch::Tensor& gram, const torch::Tensor& moment, double squares,
                const torch::Tensor& mean) {
  return squares - 2.0 * mean.dot(moment).item<double>() + mean.dot(gram.mv(mean)).item<double>();
}

}  // namespace

NormalEquations::NormalEquations(int64_t parameters)
    : gram_force(torch::zeros({parameters, parameters}, torch::kFloat64)),
      gram_energy(torch::zeros({parameters, parameters}, torch::kFloat64)),
      moment_force(torch::zeros({parameters}, torch::kFloat64)),
      moment_energy(torch::zeros({parameters}, torch::kFloat64)) {}

BayesianPosterior maximise_evidence(const NormalEquations& e, const torch::Tensor& penalised,
                                    const EvidenceOptions& options) {
  if (e.count_force + e.count_energy <= 0.0)
    throw std::invalid_argument("Bayesian regression: no labelled rows to fit");
  if (penalised.numel() != e.parameters())
    throw std::invalid_argument("Bayesian regression: the prior mask does not match the weights");
  const double penalised_count = penalised.sum().item<double>();
  const double length_squared = options.energy_length * options.energy_length;
  double alpha = 1.0;
  double beta_force =
      std::min(std::max(e.count_force, 1.0) / std::max(e.squares_force, 1e-12), kMaxNoisePrecision);
  double beta_energy = beta_force / length_squared;
  for (int iteration = 0; iteration < options.evidence_iterations; ++iteration) {
    const Solved s = solve(e, penalised, alpha, beta_force, beta_energy);
    const double gamma_prior =
        penalised_count - alpha * (s.covariance.diagonal() * penalised).sum().item<double>();
    const double gamma_force = beta_force * (s.covariance * e.gram_force).sum().item<double>();
    const double gamma_energy = beta_energy * (s.covariance * e.gram_energy).sum().item<double>();
    const double residual_force =
        std::max(residual(e.gram_force, e.moment_force, e.squares_force, s.mean), 1e-30);
    const double residual_energy =
        std::max(residual(e.gram_energy, e.moment_energy, e.squares_energy, s.mean), 0.0);
    const double weight_norm = (s.mean * s.mean * penalised).sum().item<double>();
    // Data that determine no penalised weight (zero forces of a perfect crystal and its energy,
    // which the bias explains) leave the prior where it is instead of at a bound that rounding
    // picks.
    const bool prior_undetermined = gamma_prior <= 1e-9 * penalised_count || weight_norm <= 1e-300;
    const double next_alpha =
        prior_undetermined ? alpha
                           : std::max(gamma_prior / std::max(weight_norm, 1e-300), kMinPriorPrecision);
    const double next_beta_force =
        e.count_force > 0.0
            ? std::min(std::max(e.count_force - gamma_force, 1.0) / residual_force,
                       kMaxNoisePrecision)
            : beta_force;
    // One pseudo-observation of per-atom energy residual (force noise x energy_length)^2.
    const double next_beta_energy =
        std::min((std::max(e.count_energy - gamma_energy, 0.0) + 1.0) /
                     (residual_energy + length_squared / next_beta_force),
                 kMaxNoisePrecision / length_squared);
    const bool converged = std::abs(next_alpha - alpha) <= 1e-6 * alpha &&
                           std::abs(next_beta_force - beta_force) <= 1e-6 * beta_force &&
                           std::abs(next_beta_energy - beta_energy) <= 1e-6 * beta_energy;
    alpha = next_alpha;
    beta_force = next_beta_force;
    beta_energy = next_beta_energy;
    if (converged) break;
  }
  // The posterior of the last hyperparameters.
  const Solved s = solve(e, penalised, alpha, beta_force, beta_energy);
  BayesianPosterior posterior;
  posterior.mean = s.mean;
  posterior.covariance = s.covariance;
  posterior.prior_precision = alpha;
  posterior.force_noise_precision = beta_force;
  posterior.energy_noise_precision = beta_energy;
  return posterior;
}

}  // namespace otf

#include "bayesian_descriptor_regression.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "neighbor_graph.h"

namespace otf {

namespace {

// Weak prior precision (eV^-2) on the per-element bias: the energy zero is the data's, not the
// prior's, but an element without labelled atoms keeps a defined (zero) bias.
constexpr double kBiasPrecision = 1e-6;
// Bounds that keep A positive definite when a target is fitted exactly (force noise of 1e-5 eV/A,
// weights of standard deviation 1e5 in standardised units).
constexpr double kMaxNoisePrecision = 1e10;
constexpr double kMinPriorPrecision = 1e-10;

}  // namespace

void BayesianRegressionOptions::check() const {
  if (degree != 1 && degree != 2) {
    throw std::invalid_argument("degree must be 1 or 2, got " + std::to_string(degree));
  }
  if (!(energy_length > 0.0) || !std::isfinite(energy_length)) {
    throw std::invalid_argument("energy_length must be a positive length in A");
  }
  if (evidence_iterations < 1) {
    throw std::invalid_argument("evidence_iterations must be at least 1");
  }
}

BayesianDescriptorRegression::BayesianDescriptorRegression(ThreeBodyDescriptorOptions descriptor,
                                                           BayesianRegressionOptions options)
    : descriptor_(descriptor), descriptor_options_(descriptor), options_(options) {
  options_.check();
}

int64_t BayesianDescriptorRegression::block_size() const {
  const int64_t f = descriptor_.num_features();
  return 1 + f + (options_.degree == 2 ? f * (f + 1) / 2 : 0);
}

int64_t BayesianDescriptorRegression::num_parameters() const {
  return descriptor_options_.num_species * block_size();
}

double BayesianDescriptorRegression::force_noise() const { return 1.0 / std::sqrt(beta_force_); }
double BayesianDescriptorRegression::energy_noise() const { return 1.0 / std::sqrt(beta_energy_); }

DescriptorFrame BayesianDescriptorRegression::describe(
    const PeriodicConfiguration& configuration) const {
  const double cutoff = descriptor_options_.cutoff;
  const PeriodicSystem system(configuration, cutoff);
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), cutoff);
  LocalEnvironments env =
      local_environments(graph, descriptor_options_.num_species, cutoff, torch::kFloat64);
  const torch::Tensor pair_vectors = env.pair_vectors.detach().requires_grad_(true);
  env.pair_vectors = pair_vectors;
  const torch::Tensor features = descriptor_(env);  // [C, F]
  const int64_t centres = features.size(0);
  const int64_t num_features = features.size(1);
  const int64_t neighbours = pair_vectors.size(1);
  const int64_t owned = system.num_local();

  // d(feature f of centre c)/d(pair vector c,k): one backward pass per feature (the features of a
  // centre depend on its own pair vectors only, so the gradient of their sum separates).
  std::vector<torch::Tensor> per_feature;
  per_feature.reserve(static_cast<size_t>(num_features));
  for (int64_t f = 0; f < num_features; ++f) {
    per_feature.push_back(torch::autograd::grad({features.select(1, f).sum()}, {pair_vectors}, {},
                                                /*retain_graph=*/true)[0]);
  }
  const torch::Tensor pair_jacobian = torch::stack(per_feature, 1);  // [C, F, K, 3]

  // r_ck = x_j - x_c: +J on the neighbour's owner, -J on the centre's owner.
  const auto& owner_vector = system.owner();
  const torch::Tensor owner =
      torch::tensor(std::vector<int64_t>(owner_vector.begin(), owner_vector.end()), torch::kInt64);
  const torch::Tensor neighbour_index = graph.neighbor_index;
  const torch::Tensor padding = neighbour_index.lt(0);
  const torch::Tensor neighbour_owner =
      owner.index_select(0, neighbour_index.clamp_min(0).flatten())
          .view({centres, neighbours})
          .masked_fill(padding, 0);
  const torch::Tensor masked_jacobian =
      pair_jacobian.masked_fill(padding.view({centres, 1, neighbours, 1}), 0.0);
  torch::Tensor gradients = torch::zeros({centres, num_features, owned, 3}, torch::kFloat64);
  gradients.scatter_add_(2,
                         neighbour_owner.view({centres, 1, neighbours, 1})
                             .expand({centres, num_features, neighbours, 3}),
                         masked_jacobian);
  const torch::Tensor centre_owner = owner.index_select(0, graph.centers);
  gradients.scatter_add_(
      2, centre_owner.view({centres, 1, 1, 1}).expand({centres, num_features, 1, 3}),
      -masked_jacobian.sum(2, /*keepdim=*/true));

  return DescriptorFrame{features.detach(), gradients,
                         graph.species.index_select(0, graph.centers)};
}

torch::Tensor BayesianDescriptorRegression::block_features(
    const torch::Tensor& standardised) const {
  const int64_t centres = standardised.size(0);
  std::vector<torch::Tensor> parts{torch::ones({centres, 1}, torch::kFloat64), standardised};
  if (options_.degree == 2) {
    const int64_t f = standardised.size(1);
    const torch::Tensor upper = torch::triu_indices(f, f, 0, torch::kInt64);
    parts.push_back(standardised.index_select(1, upper[0]) *
                    standardised.index_select(1, upper[1]));
  }
  return torch::cat(parts, 1);
}

RegressionRows BayesianDescriptorRegression::rows(const DescriptorFrame& frame) const {
  if (!feature_mean_.defined()) {
    throw std::logic_error("BayesianDescriptorRegression: rows() before fit()");
  }
  const int64_t num_species = descriptor_options_.num_species;
  const int64_t block = block_size();
  const int64_t num_features = frame.features.size(1);
  const int64_t owned = frame.feature_gradients.size(2);
  torch::Tensor energy_row = torch::zeros({num_species * block}, torch::kFloat64);
  torch::Tensor force_rows = torch::zeros({owned * 3, num_species * block}, torch::kFloat64);
  for (int64_t s = 0; s < num_species; ++s) {
    const torch::Tensor members = frame.species.eq(s).nonzero().flatten();
    if (members.numel() == 0) continue;
    const torch::Tensor scale = feature_scale_[s];
    const torch::Tensor standardised =
        (frame.features.index_select(0, members) - feature_mean_[s]) / scale;
    const torch::Tensor gradients =  // [c, F, atoms * 3]
        frame.feature_gradients.index_select(0, members).flatten(2) / scale.view({1, -1, 1});
    const int64_t offset = s * block;
    energy_row.narrow(0, offset, block).copy_(block_features(standardised).sum(0));
    // F = -dE/dx; the bias column has no force.
    force_rows.narrow(1, offset + 1, num_features).copy_(-gradients.sum(0).transpose(0, 1));
    if (options_.degree == 2) {
      // d(d_i d_j) = d_i dd_j + d_j dd_i, summed over the element's centres.
      const torch::Tensor products = torch::einsum("ci,cja->ija", {standardised, gradients});
      const torch::Tensor symmetric = products + products.transpose(0, 1);
      const torch::Tensor upper = torch::triu_indices(num_features, num_features, 0, torch::kInt64);
      const torch::Tensor pairs = symmetric.index({upper[0], upper[1]});  // [pairs, atoms * 3]
      force_rows.narrow(1, offset + 1 + num_features, pairs.size(0)).copy_(-pairs.transpose(0, 1));
    }
  }
  return RegressionRows{energy_row, force_rows};
}

void BayesianDescriptorRegression::add_frame(const PeriodicConfiguration& configuration,
                                             double energy, const torch::Tensor& forces) {
  DescriptorFrame frame = describe(configuration);
  const int64_t owned = frame.feature_gradients.size(2);
  if (forces.numel() != owned * 3) {
    throw std::invalid_argument("forces must be [" + std::to_string(owned) +
                                ", 3] for this frame, got " + std::to_string(forces.numel()) +
                                " numbers");
  }
  if (!std::isfinite(energy) || !torch::isfinite(forces).all().item<bool>()) {
    throw std::invalid_argument("a labelled frame's energy and forces must be finite");
  }
  frames_.push_back(
      Labelled{std::move(frame), energy, forces.to(torch::kFloat64).flatten().clone()});
}

void BayesianDescriptorRegression::fit() {
  if (frames_.empty())
    throw std::logic_error("BayesianDescriptorRegression: fit() without labelled frames");
  const int64_t num_species = descriptor_options_.num_species;
  const int64_t num_features = descriptor_.num_features();

  // Standardisation over every labelled centre of each element. A feature that does not vary
  // (one perfect crystal) keeps a scale of 1e-3 of its size, so its columns stay finite.
  feature_mean_ = torch::zeros({num_species, num_features}, torch::kFloat64);
  feature_scale_ = torch::ones({num_species, num_features}, torch::kFloat64);
  std::vector<torch::Tensor> all_features, all_species;
  for (const Labelled& labelled : frames_) {
    all_features.push_back(labelled.frame.features);
    all_species.push_back(labelled.frame.species);
  }
  const torch::Tensor features = torch::cat(all_features);
  const torch::Tensor species = torch::cat(all_species);
  for (int64_t s = 0; s < num_species; ++s) {
    const torch::Tensor of_species = features.index_select(0, species.eq(s).nonzero().flatten());
    if (of_species.size(0) == 0) continue;
    const torch::Tensor mean = of_species.mean(0);
    const torch::Tensor spread =
        of_species.size(0) > 1 ? of_species.std(0, /*unbiased=*/false) : torch::zeros_like(mean);
    feature_mean_[s] = mean;
    feature_scale_[s] = torch::maximum(spread, 1e-3 * mean.abs() + 1e-12);
  }

  // Normal equations of the force rows and of the per-atom energy rows.
  const int64_t parameters = num_parameters();
  torch::Tensor gram_force = torch::zeros({parameters, parameters}, torch::kFloat64);
  torch::Tensor gram_energy = torch::zeros_like(gram_force);
  torch::Tensor moment_force = torch::zeros({parameters}, torch::kFloat64);
  torch::Tensor moment_energy = torch::zeros_like(moment_force);
  double squares_force = 0.0, squares_energy = 0.0;
  double count_force = 0.0;
  const double count_energy = static_cast<double>(frames_.size());
  for (const Labelled& labelled : frames_) {
    const RegressionRows r = rows(labelled.frame);
    const double atoms = static_cast<double>(labelled.frame.features.size(0));
    const torch::Tensor energy_row = r.energy_row / atoms;
    const double energy_per_atom = labelled.energy / atoms;
    gram_force += r.force_rows.t().mm(r.force_rows);
    moment_force += r.force_rows.t().mv(labelled.forces);
    squares_force += labelled.forces.dot(labelled.forces).item<double>();
    count_force += static_cast<double>(labelled.forces.numel());
    gram_energy += torch::outer(energy_row, energy_row);
    moment_energy += energy_row * energy_per_atom;
    squares_energy += energy_per_atom * energy_per_atom;
  }

  // Weights under the prior: every column but each element's bias.
  torch::Tensor weighted = torch::ones({num_species, block_size()}, torch::kFloat64);
  weighted.select(1, 0).zero_();
  weighted = weighted.flatten();
  const double weighted_count = weighted.sum().item<double>();

  const double length_squared = options_.energy_length * options_.energy_length;
  double alpha = 1.0;
  double beta_force = count_force / std::max(squares_force, 1e-12);
  beta_force = std::min(beta_force, kMaxNoisePrecision);
  double beta_energy = beta_force / length_squared;
  torch::Tensor mean, covariance;
  for (int iteration = 0; iteration < options_.evidence_iterations; ++iteration) {
    const torch::Tensor prior = weighted * alpha + (1.0 - weighted) * kBiasPrecision;
    const torch::Tensor precision =
        gram_force * beta_force + gram_energy * beta_energy + torch::diag(prior);
    const torch::Tensor factor = torch::linalg_cholesky(precision);
    mean = torch::cholesky_solve(
               (moment_force * beta_force + moment_energy * beta_energy).unsqueeze(1), factor)
               .squeeze(1);
    covariance = torch::cholesky_inverse(factor);
    const double gamma_prior =
        weighted_count - alpha * (covariance.diagonal() * weighted).sum().item<double>();
    const double gamma_force = beta_force * (covariance * gram_force).sum().item<double>();
    const double gamma_energy = beta_energy * (covariance * gram_energy).sum().item<double>();
    const double residual_force =
        std::max(squares_force - 2.0 * mean.dot(moment_force).item<double>() +
                     mean.dot(gram_force.mv(mean)).item<double>(),
                 1e-30);
    const double residual_energy =
        std::max(squares_energy - 2.0 * mean.dot(moment_energy).item<double>() +
                     mean.dot(gram_energy.mv(mean)).item<double>(),
                 0.0);
    const double weight_norm = (mean * mean * weighted).sum().item<double>();
    const double next_alpha =
        std::max(gamma_prior / std::max(weight_norm, 1e-300), kMinPriorPrecision);
    const double next_beta_force =
        std::min(std::max(count_force - gamma_force, 1.0) / residual_force, kMaxNoisePrecision);
    // One pseudo-observation of per-atom energy residual (force noise x energy_length)^2.
    const double next_beta_energy =
        std::min((std::max(count_energy - gamma_energy, 0.0) + 1.0) /
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
  const torch::Tensor prior = weighted * alpha + (1.0 - weighted) * kBiasPrecision;
  const torch::Tensor factor = torch::linalg_cholesky(
      gram_force * beta_force + gram_energy * beta_energy + torch::diag(prior));
  mean_ = torch::cholesky_solve(
              (moment_force * beta_force + moment_energy * beta_energy).unsqueeze(1), factor)
              .squeeze(1);
  covariance_ = torch::cholesky_inverse(factor);
  alpha_ = alpha;
  beta_force_ = beta_force;
  beta_energy_ = beta_energy;
}

RegressionPrediction BayesianDescriptorRegression::predict(
    const PeriodicConfiguration& configuration) const {
  if (!fitted()) throw std::logic_error("BayesianDescriptorRegression: predict() before fit()");
  const RegressionRows r = rows(describe(configuration));
  RegressionPrediction prediction;
  prediction.energy = r.energy_row.dot(mean_).item<double>();
  prediction.energy_std =
      std::sqrt(std::max(r.energy_row.dot(covariance_.mv(r.energy_row)).item<double>(), 0.0));
  prediction.forces = r.force_rows.mv(mean_).view({-1, 3});
  prediction.force_std =
      (r.force_rows.mm(covariance_) * r.force_rows).sum(1).clamp_min(0.0).sqrt().view({-1, 3});
  return prediction;
}

RegressionPrediction BayesianDescriptorRegression::mean_energy_and_forces(
    const PeriodicConfiguration& configuration) const {
  if (!fitted())
    throw std::logic_error("BayesianDescriptorRegression: mean_energy_and_forces() before fit()");
  const double cutoff = descriptor_options_.cutoff;
  const PeriodicSystem system(configuration, cutoff);
  NeighborGraph graph = neighbor_graph_from_view(system.view(), cutoff);
  graph.positions = graph.positions.detach().to(torch::kFloat64).requires_grad_(true);
  const LocalEnvironments env =
      local_environments(graph, descriptor_options_.num_species, cutoff, torch::kFloat64);
  const torch::Tensor features = descriptor_(env);
  const torch::Tensor species = graph.species.index_select(0, graph.centers);
  const int64_t block = block_size();
  torch::Tensor energy = torch::zeros({}, torch::kFloat64);
  for (int64_t s = 0; s < descriptor_options_.num_species; ++s) {
    const torch::Tensor members = species.eq(s).nonzero().flatten();
    if (members.numel() == 0) continue;
    const torch::Tensor standardised =
        (features.index_select(0, members) - feature_mean_[s]) / feature_scale_[s];
    energy = energy + block_features(standardised).sum(0).dot(mean_.narrow(0, s * block, block));
  }
  const torch::Tensor gradient = torch::autograd::grad({energy}, {graph.positions})[0].contiguous();
  std::vector<double> per_atom(gradient.data_ptr<double>(),
                               gradient.data_ptr<double>() + gradient.numel());
  const std::vector<double> folded = system.fold_onto_owners(per_atom);
  RegressionPrediction prediction;
  prediction.energy = energy.item<double>();
  prediction.forces = -torch::tensor(folded, torch::kFloat64).view({-1, 3});
  return prediction;
}

}  // namespace otf

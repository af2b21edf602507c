#include "bayesian_descriptor_regression.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "bayesian_evidence.h"
#include "neighbor_graph.h"

namespace otf {


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
  NormalEquations equations(num_parameters());
  for (const Labelled& labelled : frames_) {
    const RegressionRows r = rows(labelled.frame);
    const double atoms = static_cast<double>(labelled.frame.features.size(0));
    const torch::Tensor energy_row = r.energy_row / atoms;
    const double energy_per_atom = labelled.energy / atoms;
    equations.gram_force += r.force_rows.t().mm(r.force_rows);
    equations.moment_force += r.force_rows.t().mv(labelled.forces);
    equations.squares_force += labelled.forces.dot(labelled.forces).item<double>();
    equations.count_force += static_cast<double>(labelled.forces.numel());
    equations.gram_energy += torch::outer(energy_row, energy_row);
    equations.moment_energy += energy_row * energy_per_atom;
    equations.squares_energy += energy_per_atom * energy_per_atom;
    equations.count_energy += 1.0;
  }

  // Weights under the prior: every column but each element's bias.
  torch::Tensor penalised = torch::ones({num_species, block_size()}, torch::kFloat64);
  penalised.select(1, 0).zero_();
  EvidenceOptions evidence;
  evidence.energy_length = options_.energy_length;
  evidence.evidence_iterations = options_.evidence_iterations;
  const BayesianPosterior posterior = maximise_evidence(equations, penalised.flatten(), evidence);
  mean_ = posterior.mean;
  covariance_ = posterior.covariance;
  alpha_ = posterior.prior_precision;
  beta_force_ = posterior.force_noise_precision;
  beta_energy_ = posterior.energy_noise_precision;
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

#include "bayesian_linear_potential.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "autocast_region.h"

namespace otf {
namespace {

int64_t read_degree(const nlohmann::json& json) {
  if (!json.contains("degree")) return 1;
  const nlohmann::json& degree = json.at("degree");
  if (!degree.is_number_integer() || (degree.get<int64_t>() != 1 && degree.get<int64_t>() != 2))
    throw std::invalid_argument(
        "model spec: hyperparameter 'degree' of 'bayesian-linear' must be 1 (linear in the "
        "descriptor) or 2 (also its pairwise products), got " +
        degree.dump());
  return degree.get<int64_t>();
}

}  // namespace

BayesianLinearPotential::BayesianLinearPotential(ModelSpec spec) :
    DescriptorPotential(std::move(spec), kArchitecture,
                        {"radial_functions", "angular_radial_functions", "max_angular_order",
                         "degree"}) {
  degree_ = read_degree(this->spec().hyperparameters);
  // A parameter, though no optimizer moves it: the engine's checkpoint, snapshot and replica
  // hash cover the parameters, and the weights are what the fit changes.
  weights_ = register_parameter(
      "weights", torch::zeros({committee_size(), num_species(), block_size()},
                              torch::TensorOptions().dtype(dtype())));
  fits_ = register_buffer("fits", torch::zeros({}, torch::kInt64));
  hyperparameters_ = register_buffer("posterior_hyperparameters", torch::zeros({3}, torch::kFloat64));

  nlohmann::json complete = descriptor_options_.to_json();
  complete["degree"] = degree_;
  set_hyperparameters(complete);
}

int64_t BayesianLinearPotential::block_size() const {
  const int64_t f = descriptor_->num_features();
  return 1 + f + (degree_ == 2 ? f * (f + 1) / 2 : 0);
}

torch::Tensor BayesianLinearPotential::basis(const torch::Tensor& standardised) const {
  std::vector<int64_t> shape = standardised.sizes().vec();
  shape.back() = 1;
  std::vector<torch::Tensor> parts{torch::ones(shape, standardised.options()), standardised};
  if (degree_ == 2) {
    const int64_t f = standardised.size(-1);
    const torch::Tensor upper =
        torch::triu_indices(f, f, 0, torch::TensorOptions().dtype(torch::kInt64))
            .to(standardised.device());
    parts.push_back(standardised.index_select(-1, upper[0]) *
                    standardised.index_select(-1, upper[1]));
  }
  return torch::cat(parts, -1);
}

torch::Tensor BayesianLinearPotential::penalised_weights() const {
  torch::Tensor penalised = torch::ones({num_species(), block_size()}, torch::kFloat64);
  penalised.select(1, 0).zero_();
  return penalised.flatten();
}

torch::Tensor BayesianLinearPotential::member_energies_from_basis(
    const torch::Tensor& phi, const torch::Tensor& center_species) const {
  // A linear model loses its accuracy in a lower precision: the products stay in the weights'.
  const AutocastRegion model_precision = AutocastRegion::disabled(phi.device());
  const torch::Tensor per_centre = weights_.index_select(1, center_species);  // [H, C, B]
  return (per_centre * phi.to(weights_.scalar_type())).sum(-1);
}

torch::Tensor BayesianLinearPotential::member_network_energies(const LocalEnvironments& env) {
  torch::Tensor phi = basis(standardised_descriptors(env));  // [C, B] or [members, C, B]
  if (!env.member_resolved()) phi = phi.unsqueeze(0);
  return member_energies_from_basis(phi, env.center_species);
}

MemberPairGradients BayesianLinearPotential::member_energies_and_pair_gradients(
    const LocalEnvironments& env, const PairGradientOptions& options) {
  require_shared_environments(env);
  torch::AutoGradMode grad_mode(true);
  LocalEnvironments shared = env;
  const torch::Tensor pair_vectors = env.pair_vectors.detach().requires_grad_(true);
  shared.pair_vectors = pair_vectors;
  const torch::Tensor phi = basis(standardised_descriptors(shared));
  MemberPairGradients out;
  out.atomic_energies = with_energy_shifts(
      member_energies_from_basis(phi.unsqueeze(0), env.center_species), env.center_species);
  const int64_t members = committee_size();
  std::vector<torch::Tensor> gradients;
  gradients.reserve(static_cast<std::size_t>(members));
  for (int64_t h = 0; h < members; ++h) {
    const double scale = options.gradient_scale;
    const torch::Tensor energy = out.atomic_energies[h].sum() * scale;
    const bool last = h + 1 == members;
    torch::Tensor g = torch::autograd::grad({energy}, {pair_vectors}, {},
                                            /*retain_graph=*/options.create_graph || !last,
                                            options.create_graph)[0];
    gradients.push_back(scale == 1.0 ? g : g / scale);
  }
  out.pair_gradients = torch::stack(gradients);
  return out;
}

void BayesianLinearPotential::set_posterior(const BayesianPosterior& posterior) {
  const int64_t parameters = num_weights();
  if (posterior.mean.numel() != parameters || posterior.covariance.numel() != parameters * parameters)
    throw std::invalid_argument("bayesian-linear: the posterior has " +
                                std::to_string(posterior.mean.numel()) +
                                " weights, the model " + std::to_string(parameters));
  torch::NoGradGuard no_grad;
  const int64_t fit = fits() + 1;
  const torch::Tensor mean = posterior.mean.to(torch::kFloat64).cpu();
  const torch::Tensor covariance = posterior.covariance.to(torch::kFloat64).cpu();
  // A covariance that rounding left slightly indefinite gets a jitter of its own scale.
  torch::Tensor factor;
  const double jitter = 1e-12 * std::max(covariance.diagonal().max().item<double>(), 1e-300);
  for (double extra = 0.0; !factor.defined(); extra = extra == 0.0 ? jitter : 10.0 * extra) {
    const auto [candidate, info] = torch::linalg_cholesky_ex(
        covariance + extra * torch::eye(parameters, torch::kFloat64));
    if (info.item<int64_t>() == 0) factor = candidate;
    if (extra > 1e6 * jitter && !factor.defined())
      throw std::runtime_error("bayesian-linear: the posterior covariance is not positive definite");
  }
  // Standard normal draws from a generator seeded by the spec's seed and the fit's number: the
  // same on every rank, platform-independent (Box-Muller on mt19937_64's integers).
  std::mt19937_64 generator(spec().seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(fit));
  auto uniform = [&generator] {
    return (static_cast<double>(generator() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  };
  const int64_t members = committee_size();
  torch::Tensor drawn = torch::empty({members, parameters}, torch::kFloat64);
  for (int64_t pair = 0; 2 * pair + 1 < members; ++pair) {
    std::vector<double> z(static_cast<std::size_t>(parameters));
    for (std::size_t k = 0; k < z.size(); k += 2) {
      const double radius = std::sqrt(-2.0 * std::log(uniform()));
      const double angle = 6.283185307179586 * uniform();
      z[k] = radius * std::cos(angle);
      if (k + 1 < z.size()) z[k + 1] = radius * std::sin(angle);
    }
    const torch::Tensor deviation = factor.mv(torch::tensor(z, torch::kFloat64));
    drawn[2 * pair] = mean + deviation;
    drawn[2 * pair + 1] = mean - deviation;
  }
  if (members % 2 == 1) drawn[members - 1] = mean;
  weights_.copy_(drawn.reshape(weights_.sizes()).to(weights_.scalar_type()).to(weights_.device()));
  fits_.fill_(fit);
  hyperparameters_.copy_(torch::tensor({posterior.prior_precision, posterior.force_noise_precision,
                                        posterior.energy_noise_precision},
                                       torch::kFloat64)
                             .to(hyperparameters_.device()));
}

double BayesianLinearPotential::prior_precision() const {
  return hyperparameters_[0].item<double>();
}

double BayesianLinearPotential::force_noise() const {
  const double beta = hyperparameters_[1].item<double>();
  return beta > 0.0 ? 1.0 / std::sqrt(beta) : 0.0;
}

double BayesianLinearPotential::energy_noise() const {
  const double beta = hyperparameters_[2].item<double>();
  return beta > 0.0 ? 1.0 / std::sqrt(beta) : 0.0;
}

}  // namespace otf

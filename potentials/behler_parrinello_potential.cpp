#include "behler_parrinello_potential.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "autocast_region.h"

namespace otf {
namespace {

ElementCommitteeOptions committee_options(const ModelSpec& spec, int64_t inputs) {
  ElementCommitteeOptions options;
  options.num_species = spec.num_species();
  options.members = spec.committee_size;
  options.inputs = inputs;
  options.seed = spec.seed;
  options.dtype = spec.dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
  const nlohmann::json& json = spec.hyperparameters;
  if (json.contains("hidden")) {
    const nlohmann::json& hidden = json.at("hidden");
    bool valid = hidden.is_array() && hidden.size() <= 8;
    if (valid) {
      for (const auto& width : hidden) valid = valid && width.is_number_integer() && width.get<int64_t>() >= 1 && width.get<int64_t>() <= 4096;
    }
    if (!valid) {
      throw std::invalid_argument("model spec: hyperparameter 'hidden' must be a list of at most 8 layer widths from 1 to 4096, got " + hidden.dump());
    }
    options.hidden = hidden.get<std::vector<int64_t>>();
  }
  if (json.contains("activation")) {
    const nlohmann::json& activation = json.at("activation");
    if (!activation.is_string()) {
      throw std::invalid_argument("model spec: hyperparameter 'activation' must be a string (silu, tanh, softplus), got " + activation.dump());
    }
    try {
      options.activation = parse_activation(activation.get<std::string>());
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(std::string("model spec: hyperparameter 'activation': ") + error.what());
    }
  }
  return options;
}

}  // namespace

BehlerParrinelloPotential::BehlerParrinelloPotential(ModelSpec spec) :
    DescriptorPotential(std::move(spec), kArchitecture,
                        {"radial_functions", "angular_radial_functions", "max_angular_order",
                         "hidden", "activation"}) {
  const ElementCommitteeOptions network_options =
      committee_options(this->spec(), descriptor_->num_features());
  networks_ = register_module("networks", std::make_shared<ElementCommittee>(network_options));

  nlohmann::json complete = descriptor_options_.to_json();
  complete["hidden"] = network_options.hidden;
  complete["activation"] = to_string(network_options.activation);
  set_hyperparameters(complete);
}

torch::Tensor BehlerParrinelloPotential::member_network_energies(const LocalEnvironments& env) {
  return network_energies(standardised_descriptors(env), env.center_species);
}

torch::Tensor BehlerParrinelloPotential::network_energies(const torch::Tensor& standardised,
                                                          const torch::Tensor& center_species) {
  const int64_t row_dim = standardised.dim() - 2;
  if (num_species() == 1) return networks_->forward(0, standardised);
  torch::Tensor energies =
      torch::zeros({committee_size(), center_species.size(0)},
                   torch::TensorOptions().dtype(torch::kFloat64).device(standardised.device()));
  for (int64_t s = 0; s < num_species(); ++s) {
    const torch::Tensor rows = (center_species == s).nonzero().squeeze(1);
    if (rows.numel() == 0) continue;
    const torch::Tensor part = networks_->forward(s, standardised.index_select(row_dim, rows));
    energies = energies.index_copy(1, rows, part.to(torch::kFloat64));
  }
  return energies;
}

MemberPairGradients BehlerParrinelloPotential::member_energies_and_pair_gradients(
    const LocalEnvironments& env, const PairGradientOptions& options) {
  require_shared_environments(env);
  torch::AutoGradMode grad_mode(true);
  const int64_t members = committee_size(), centers = env.num_centers();
  const PairBasis basis = pair_basis(env.pair_vectors, env.neighbor_species, descriptor_->moments_shape());
  torch::Tensor moments;
  {
    // The descriptor's products stay in the input precision (three_body_descriptor.h).
    const AutocastRegion input_precision = AutocastRegion::disabled(env.pair_vectors.device());
    torch::NoGradGuard no_grad;
    moments = moments_from_basis(basis).to(dtype());  // [C, J, N]
  }
  const int64_t channels = moments.size(1), count = moments.size(2);
  // One copy of the moments per member, a leaf: the gradient with respect to copy h is member h's.
  const torch::Tensor member_moments = moments.unsqueeze(0)
                                           .expand({members, -1, -1, -1})
                                           .reshape({members * centers, channels, count})
                                           .detach()
                                           .requires_grad_(true);
  const torch::Tensor standardised =
      normalizer_
          ->forward(descriptor_->features_from_moments(member_moments), env.center_species.repeat({members}))
          .reshape({members, centers, descriptor_->num_features()});
  MemberPairGradients out;
  out.atomic_energies = with_energy_shifts(network_energies(standardised, env.center_species), env.center_species);
  const torch::Tensor moment_gradients = energy_gradient(out.atomic_energies, member_moments, options);
  const AutocastRegion input_precision = AutocastRegion::disabled(env.pair_vectors.device());
  out.pair_gradients =
      pair_gradients_from_moment_gradients(basis, moment_gradients.reshape({members, centers, channels, count}));
  return out;
}

}  // namespace otf

#include "descriptor_potential.h"

#include <stdexcept>

namespace otf {
namespace {

void check_hyperparameter_keys(const nlohmann::json& json, const std::string& architecture,
                               const std::set<std::string>& accepted) {
  if (!json.is_object())
    throw std::invalid_argument("model spec: 'hyperparameters' must be an object, got " +
                                json.dump());
  for (const auto& item : json.items()) {
    if (accepted.count(item.key()) != 0) continue;
    std::string names;
    for (const std::string& key : accepted) names += (names.empty() ? "" : ", ") + key;
    throw std::invalid_argument("model spec: unknown hyperparameter '" + item.key() +
                                "' for architecture '" + architecture + "' (expected one of: " +
                                names + ")");
  }
}

}  // namespace

DescriptorPotential::DescriptorPotential(ModelSpec spec, const std::string& architecture,
                                         const std::set<std::string>& accepted) :
    Potential(std::move(spec)) {
  check_hyperparameter_keys(this->spec().hyperparameters, architecture, accepted);
  descriptor_options_ = ThreeBodyDescriptorOptions::from_json(this->spec().hyperparameters,
                                                              num_species(), cutoff());
  descriptor_ = std::make_unique<ThreeBodyDescriptor>(descriptor_options_);
  normalizer_ = register_module("normalizer", std::make_shared<DescriptorNormalizer>(
                                                  num_species(), descriptor_->num_features(), dtype()));
}

torch::Tensor DescriptorPotential::standardised_descriptors(const LocalEnvironments& env) {
  if (!env.member_resolved())
    return normalizer_->forward((*descriptor_)(env), env.center_species);
  const int64_t members = env.pair_vectors.size(0), centers = env.num_centers();
  LocalEnvironments flat;
  flat.pair_vectors = env.pair_vectors.reshape({members * centers, env.max_neighbors(), 3});
  flat.neighbor_species = env.neighbor_species.repeat({members, 1});
  flat.center_species = env.center_species.repeat({members});
  flat.first_derivatives_only = env.first_derivatives_only;
  return normalizer_->forward((*descriptor_)(flat), flat.center_species)
      .reshape({members, centers, descriptor_->num_features()});
}

DescriptorMoments DescriptorPotential::descriptor_moments(const LocalEnvironments& env) {
  torch::NoGradGuard no_grad;
  return normalizer_->moments((*descriptor_)(env), env.center_species);
}

void DescriptorPotential::accumulate_descriptor_statistics(const DescriptorMoments& moments) {
  normalizer_->accumulate(moments);
}

double DescriptorPotential::descriptor_spread_ratio(const DescriptorMoments& frame) const {
  return normalizer_->spread_ratio(frame);
}

void DescriptorPotential::freeze_descriptor_statistics() { normalizer_->freeze(); }

bool DescriptorPotential::descriptor_statistics_frozen() const { return normalizer_->frozen(); }

}  // namespace otf

#include "three_body_descriptor.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "radial_basis.h"

namespace otf {
namespace {

int64_t read_integer(const nlohmann::json& json, const char* key, int64_t fallback, int64_t lowest,
                     int64_t highest) {
  if (!json.contains(key)) return fallback;
  const nlohmann::json& value = json.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() < lowest ||
      value.get<int64_t>() > highest) {
    throw std::invalid_argument("model spec: hyperparameter '" + std::string(key) + "' must be an integer from " +
                                std::to_string(lowest) + " to " + std::to_string(highest) +
                                ", got " + value.dump());
  }
  return value.get<int64_t>();
}

}  // namespace

ThreeBodyDescriptorOptions ThreeBodyDescriptorOptions::from_json(const nlohmann::json& json,
                                                                 int64_t num_species,
                                                                 double cutoff) {
  ThreeBodyDescriptorOptions options;
  options.num_species = num_species;
  options.cutoff = cutoff;
  options.radial_functions = read_integer(json, "radial_functions", options.radial_functions, 1, 32);
  options.angular_radial_functions =
      read_integer(json, "angular_radial_functions",
                   std::min(options.angular_radial_functions, options.radial_functions), 0,
                   options.radial_functions);
  options.max_angular_order =
      read_integer(json, "max_angular_order", options.max_angular_order, 0, 3);
  return options;
}

nlohmann::json ThreeBodyDescriptorOptions::to_json() const {
  return {{"radial_functions", radial_functions},
          {"angular_radial_functions", angular_radial_functions},
          {"max_angular_order", max_angular_order}};
}

ThreeBodyDescriptor::ThreeBodyDescriptor(ThreeBodyDescriptorOptions options)
    : options_(options) {
  if (options_.num_species < 1) throw std::invalid_argument("descriptor: no species");
  if (!(options_.cutoff > 0.0) || !std::isfinite(options_.cutoff)) {
    throw std::invalid_argument("descriptor: cutoff must be finite and > 0");
  }
  // Degree-0 monomials give the radial features; degrees 1.. the angular ones.
  const int64_t max_degree = options_.angular_radial_functions > 0 ? options_.max_angular_order : 0;
  moments_shape_ = {options_.num_species, options_.cutoff, options_.radial_functions, max_degree};

  std::vector<int64_t> channels;
  for (int64_t s = 0; s < options_.num_species; ++s) {
    for (int64_t k = 0; k < options_.angular_radial_functions; ++k) {
      channels.push_back(s * options_.radial_functions + k);
    }
  }
  const auto angular = static_cast<int64_t>(channels.size());
  angular_channels_ = torch::tensor(channels, torch::kInt64);
  std::vector<int64_t> flat_upper;
  for (int64_t a = 0; a < angular; ++a) {
    for (int64_t b = a; b < angular; ++b) flat_upper.push_back(a * angular + b);
  }
  pair_rows_ = torch::tensor(flat_upper, torch::kInt64);
  num_features_ = options_.num_species * options_.radial_functions +
                  max_degree * static_cast<int64_t>(flat_upper.size());
}

torch::Tensor ThreeBodyDescriptor::operator()(const LocalEnvironments& env) const {
  const AutocastRegion input_precision = AutocastRegion::disabled(env.pair_vectors.device());
  // The fused kernel is host code: tensors on a GPU take the differentiable composition.
  return features_from_moments(
      env.first_derivatives_only && env.pair_vectors.device().is_cpu()
          ? pair_moments_first_order(env.pair_vectors, env.neighbor_species, moments_shape_)
          : pair_moments(env.pair_vectors, env.neighbor_species, moments_shape_));
}

torch::Tensor ThreeBodyDescriptor::features_from_moments(const torch::Tensor& moments) const {
  // In the input's precision also inside an autocast region: see the header.
  const AutocastRegion input_precision = AutocastRegion::disabled(moments.device());
  const int64_t centers = moments.size(0);
  std::vector<torch::Tensor> features = {moments.select(-1, 0)};
  if (moments_shape_.max_degree > 0) {
    const torch::Tensor angular = moments.index_select(1, angular_channels_.to(moments.device()));  // [C, A, monomials]
    const int64_t count = angular.size(1);
    for (int64_t degree = 1; degree <= moments_shape_.max_degree; ++degree) {
      const torch::Tensor block =
          angular.narrow(-1, first_monomial_of_degree(degree), monomials_of_degree(degree));
      const torch::Tensor gram = torch::bmm(block, block.transpose(1, 2));  // [C, A, A]
      features.push_back(gram.reshape({centers, count * count}).index_select(1, pair_rows_.to(gram.device())));
    }
  }
  return torch::cat(features, -1);
}

}  // namespace otf

#include "element_committee.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "keywords.h"

namespace otf {

namespace {

constexpr KeywordTable<Activation, 3> kActivationNames{{
    {"silu", Activation::SiLU},
    {"tanh", Activation::Tanh},
    {"softplus", Activation::Softplus},
}};

}  // namespace

Activation parse_activation(std::string_view text) {
  return parse_keyword(kActivationNames, text, "activation", "expected one of: silu, tanh, softplus");
}

std::string to_string(Activation activation) {
  return keyword_spelling(kActivationNames, activation, "Activation");
}

namespace {
torch::Tensor activate(const torch::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::SiLU: return torch::silu(x);
    case Activation::Tanh: return torch::tanh(x);
    case Activation::Softplus: return torch::softplus(x);
  }
  return x;
}
}  // namespace

ElementCommittee::ElementCommittee(const ElementCommitteeOptions& options) : options_(options) {
  if (options_.num_species < 1 || options_.members < 1 || options_.inputs < 1) {
    throw std::invalid_argument("element committee: species, members and inputs must be >= 1");
  }
  for (int64_t width : options_.hidden) {
    if (width < 1) throw std::invalid_argument("element committee: hidden widths must be >= 1");
  }
  // One generator for the whole committee: member m's weights are a different draw of the same
  // stream, so members start apart (the source of their disagreement) and a seed reproduces all.
  auto generator = at::detail::createCPUGenerator(options_.seed);
  std::vector<int64_t> widths = {options_.inputs};
  widths.insert(widths.end(), options_.hidden.begin(), options_.hidden.end());
  widths.push_back(1);
  weights_.resize(static_cast<std::size_t>(options_.num_species));
  biases_.resize(static_cast<std::size_t>(options_.num_species));
  for (int64_t s = 0; s < options_.num_species; ++s) {
    for (std::size_t layer = 0; layer + 1 < widths.size(); ++layer) {
      const int64_t in = widths[layer], out = widths[layer + 1];
      // LeCun-normal: unit-variance activations for standardised inputs. Drawn in float64 so
      // that float32 and float64 models of one seed start from the same weights, up to rounding.
      const torch::Tensor weight =
          (torch::randn({options_.members, in, out}, generator, torch::kFloat64) /
           std::sqrt(static_cast<double>(in)))
              .to(options_.dtype);
      const torch::Tensor bias = torch::zeros({options_.members, 1, out}, options_.dtype);
      const std::string name = "species" + std::to_string(s) + "_layer" + std::to_string(layer);
      weights_[static_cast<std::size_t>(s)].push_back(register_parameter(name + "_weight", weight));
      biases_[static_cast<std::size_t>(s)].push_back(register_parameter(name + "_bias", bias));
    }
  }
}

torch::Tensor ElementCommittee::forward(int64_t species, const torch::Tensor& features) const {
  const auto& weights = weights_.at(static_cast<std::size_t>(species));
  const auto& biases = biases_.at(static_cast<std::size_t>(species));
  torch::Tensor hidden =
      features.dim() == 3 ? features : features.unsqueeze(0).expand({options_.members, -1, -1});
  for (std::size_t layer = 0; layer < weights.size(); ++layer) {
    hidden = torch::baddbmm(biases[layer], hidden, weights[layer]);
    if (layer + 1 < weights.size()) hidden = activate(hidden, options_.activation);
  }
  return hidden.squeeze(-1);
}

}  // namespace otf

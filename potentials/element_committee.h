// One multilayer perceptron per element and committee member, evaluated for all members at once
// with batched matrix products ([members, atoms, features] x [members, features, width]).
// Members differ only by their initial weights; the spread of their outputs on a configuration is
// the model's uncertainty there.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace otf {

enum class Activation { SiLU, Tanh, Softplus };
// "silu", "tanh", "softplus" in any case; std::invalid_argument listing them otherwise.
Activation parse_activation(std::string_view text);
std::string to_string(Activation activation);

struct ElementCommitteeOptions {
  int64_t num_species = 1;
  int64_t members = 4;
  int64_t inputs = 1;
  std::vector<int64_t> hidden = {64, 64};
  Activation activation = Activation::SiLU;
  uint64_t seed = 1;
  torch::ScalarType dtype = torch::kFloat32;  // of the parameters
};

class ElementCommittee : public torch::nn::Module {
 public:
  explicit ElementCommittee(const ElementCommitteeOptions& options);

  // features [atoms, inputs] (shared by the members) or [members, atoms, inputs] (each member its
  // own) of atoms that all have species `species`: [members, atoms].
  torch::Tensor forward(int64_t species, const torch::Tensor& features) const;

  const ElementCommitteeOptions& options() const { return options_; }

 private:
  ElementCommitteeOptions options_;
  // Per species, per layer: weight [members, in, out], bias [members, 1, out].
  std::vector<std::vector<torch::Tensor>> weights_, biases_;
};

}  // namespace otf

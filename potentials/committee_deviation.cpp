#include "committee_deviation.h"

#include <stdexcept>

namespace otf {

torch::Tensor committee_deviation(const torch::Tensor& member_values) {
  if (member_values.dim() < 1 || member_values.size(0) < 1)
    throw std::invalid_argument("committee_deviation: expected [members, ...] with members >= 1");
  return member_values.std(0, /*unbiased=*/false);
}

torch::Tensor committee_vector_deviation(const torch::Tensor& member_vectors) {
  if (member_vectors.dim() < 2 || member_vectors.size(0) < 1)
    throw std::invalid_argument(
        "committee_vector_deviation: expected [members, ..., components] with members >= 1");
  return (member_vectors - member_vectors.mean(0, /*keepdim=*/true)).pow(2).sum(-1).mean(0).sqrt();
}

}  // namespace otf

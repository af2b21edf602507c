// Copies and bitwise comparison of tensor lists (parameters, gradients, optimizer state), shared by
// the tests that check a skipped step or a replica left everything exactly as it was.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace otf::testing {

inline std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const auto& tensor : tensors) copies.push_back(tensor.detach().clone());
  return copies;
}

inline bool all_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  bool equal = a.size() == b.size();
  for (size_t i = 0; equal && i < a.size(); ++i) equal = torch::equal(a[i], b[i]);
  return equal;
}

}  // namespace otf::testing

// The committee's uncertainty, in one place: how far the members' predictions of one quantity
// spread around their mean. Every style and the training layer use these two functions, so the
// per-atom energy uncertainty of pair_style otf and compute otf/atom and the force uncertainty of
// fix otf/train's policy are the same formula everywhere (docs/potentials.md, "Uncertainty").
#pragma once

#include <torch/torch.h>

namespace otf {

// Members along dim 0, one scalar per item after it ([members, items]): per item
// sqrt(mean_k (v_k - mean_k v)^2), the population standard deviation over the members.
torch::Tensor committee_deviation(const torch::Tensor& member_values);

// Members along dim 0, one vector per item in the last dim ([members, atoms, 3]): per atom
// sqrt(mean_k |F_k - mean_k F|^2), DeePMD-kit's force model deviation.
torch::Tensor committee_vector_deviation(const torch::Tensor& member_vectors);

}  // namespace otf

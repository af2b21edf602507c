#include "build_info.h"

#include <torch/torch.h>
#include <torch/version.h>

namespace otf {

BuildInfo build_info() {
  BuildInfo info;
  info.otf_version = OTF_VERSION;
  info.torch_version = TORCH_VERSION;
  info.intra_op_threads = at::get_num_threads();
  info.cuda_available = torch::cuda::is_available();
  info.cuda_device_count = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  return info;
}

double torch_self_check(int rank) {
  // ones(4,4) @ (rank+1)*ones(4,4) has every element 4*(rank+1); the sum over 16 elements is
  // 64*(rank+1). Integers well inside float32's exact range, so the check is exact.
  const auto a = torch::ones({4, 4});
  const auto b = torch::full({4, 4}, static_cast<float>(rank + 1));
  return torch::matmul(a, b).sum().item<double>();
}

}  // namespace otf

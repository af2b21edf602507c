// What this build of the OTF-Torch engine is and runs on: versions and the LibTorch runtime it
// sees. Printed by the plugin on load and by the `otf/info` command, so a user's bug report says
// which LibTorch and threading a run actually used.
#pragma once

#include <string>

namespace otf {

struct BuildInfo {
  std::string otf_version;      // OTF-Torch's own version
  std::string torch_version;    // LibTorch the engine was compiled against
  int intra_op_threads = 1;     // LibTorch's intra-op threads in this process (this MPI rank)
  bool cuda_available = false;  // a CUDA LibTorch with a visible device
  int cuda_device_count = 0;
};

BuildInfo build_info();

// Runs one small LibTorch computation (a matrix product and a reduction) and returns its
// result, exactly 64 * (rank + 1); used by `otf/info`
// to prove that LibTorch really works on every MPI rank, not only that the plugin loaded.
double torch_self_check(int rank);

}  // namespace otf

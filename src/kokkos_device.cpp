#include "kokkos_device.h"

#include <torch/cuda.h>

#include <stdexcept>
#include <string>

namespace otf {

c10::Device torch_device_for_kokkos(std::string_view execution_space, int device_id,
                                    bool torch_has_cuda) {
  const std::string space(execution_space);
  if (space == "Serial" || space == "OpenMP" || space == "Threads" || space == "HPX") {
    return c10::Device(c10::kCPU);
  }
  if (space == "Cuda") {
    if (device_id < 0) {
      throw std::runtime_error("Kokkos runs on CUDA but no GPU id was given (device " +
                               std::to_string(device_id) + ")");
    }
    if (!torch_has_cuda) {
      throw std::runtime_error(
          "LAMMPS runs Kokkos on CUDA device " + std::to_string(device_id) +
          ", but this LibTorch has no CUDA (or sees no GPU): build OTF-Torch against a CUDA "
          "LibTorch (-DTorch_DIR=<libtorch with CUDA>/share/cmake/Torch), or run Kokkos on the host "
          "(a Kokkos build with Serial or OpenMP as its device)");
    }
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_id));
  }
  if (space == "HIP" || space == "SYCL" || space == "OpenMPTarget") {
    throw std::runtime_error("Kokkos runs on " + space +
                             ", which OTF-Torch does not support (supported: Serial, OpenMP, "
                             "Threads, HPX on the host; Cuda with a CUDA LibTorch)");
  }
  throw std::runtime_error("unknown Kokkos execution space '" + space +
                           "' (supported: Serial, OpenMP, Threads, HPX, Cuda)");
}

c10::Device torch_device_for_kokkos(std::string_view execution_space, int device_id) {
  return torch_device_for_kokkos(execution_space, device_id, torch::cuda::is_available());
}

std::vector<c10::Device> training_devices(const c10::Device& rank_device) {
  return {rank_device};
}

}  // namespace otf

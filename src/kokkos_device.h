// Which LibTorch device a LAMMPS rank's model and training run on, given where that rank's Kokkos
// execution space runs (issue: the training workflow's device list comes from the Kokkos devices).
// Kept as strings in, device out, so that it is tested without Kokkos or a GPU.
#pragma once

#include <c10/core/Device.h>

#include <string_view>
#include <vector>

namespace otf {

// The LibTorch device for a Kokkos execution space by its name (Kokkos' ExecutionSpace::name():
// "Serial", "OpenMP", "Threads" and "HPX" run on the host: CPU; "Cuda": cuda:<device_id>).
// torch_has_cuda says whether this LibTorch can run on CUDA. Throws std::runtime_error for a CUDA
// space facing a LibTorch without CUDA, and for spaces LibTorch cannot serve (HIP, SYCL,
// OpenMPTarget, unknown names), each message naming the space and what to do.
c10::Device torch_device_for_kokkos(std::string_view execution_space, int device_id,
                                    bool torch_has_cuda);
// The same with torch_has_cuda from this LibTorch (torch::cuda::is_available()).
c10::Device torch_device_for_kokkos(std::string_view execution_space, int device_id);

// The training strategy's device list of a rank: its one device; the first entry is the primary
// device, which holds the autocast region and the GradScaler (TrainingStrategyOptions::devices).
std::vector<c10::Device> training_devices(const c10::Device& rank_device);

}  // namespace otf

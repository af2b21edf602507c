// The mapping from a rank's Kokkos execution space to its LibTorch device: host spaces give the
// CPU, CUDA gives cuda:<id> when LibTorch has CUDA and a clear error (naming the fix) when it has
// not, and spaces LibTorch cannot serve are errors naming them.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <stdexcept>
#include <string>

#include "expect_error.h"
#include "kokkos_device.h"

namespace otf {
namespace {

void expect_refused_by_this_libtorch() {
  testing::expect_error<std::runtime_error>([] { torch_device_for_kokkos("Cuda", 0); },
                                            {"this LibTorch has no CUDA"});
}

void expect_refused(const char* space, int device_id, bool torch_has_cuda, const char* fragment) {
  testing::expect_error<std::runtime_error>(
      [&] { torch_device_for_kokkos(space, device_id, torch_has_cuda); }, {fragment});
}

TEST(KokkosDevice, HostExecutionSpacesRunOnTheCpu) {
  for (const char* space : {"Serial", "OpenMP", "Threads", "HPX"}) {
    for (bool has_cuda : {false, true}) {
      EXPECT_EQ(torch_device_for_kokkos(space, -1, has_cuda), c10::Device(c10::kCPU)) << space;
      EXPECT_EQ(torch_device_for_kokkos(space, 3, has_cuda), c10::Device(c10::kCPU)) << space;
    }
  }
}

TEST(KokkosDevice, CudaMapsToTheRanksGpuWhenLibTorchHasCuda) {
  EXPECT_EQ(torch_device_for_kokkos("Cuda", 0, true), c10::Device(c10::kCUDA, 0));
  EXPECT_EQ(torch_device_for_kokkos("Cuda", 2, true), c10::Device(c10::kCUDA, 2));
}

TEST(KokkosDevice, CudaWithoutACudaLibTorchIsAClearError) {
  expect_refused("Cuda", 1, false, "CUDA device 1, but this LibTorch has no CUDA");
  expect_refused("Cuda", 1, false, "-DTorch_DIR=");
  expect_refused("Cuda", -1, true, "no GPU id");
}

TEST(KokkosDevice, UnsupportedAndUnknownSpacesAreNamed) {
  expect_refused("HIP", 0, true, "Kokkos runs on HIP, which OTF-Torch does not support");
  expect_refused("SYCL", 0, true, "SYCL");
  expect_refused("Quantum", 0, true, "unknown Kokkos execution space 'Quantum'");
}

TEST(KokkosDevice, ThisLibTorchDecidesForCuda) {
  // Without the flag, the mapping asks this LibTorch: a CUDA build with a visible GPU gives
  // cuda:0, any other build refuses CUDA with the message above. The host is accepted by both.
  if (torch::cuda::is_available()) {
    EXPECT_EQ(torch_device_for_kokkos("Cuda", 0), c10::Device(c10::kCUDA, 0));
  } else {
    expect_refused_by_this_libtorch();
  }
  EXPECT_EQ(torch_device_for_kokkos("Serial", 0), c10::Device(c10::kCPU));
}

TEST(KokkosDevice, TheTrainingDeviceListStartsWithTheRanksDevice) {
  const auto devices = training_devices(c10::Device(c10::kCUDA, 1));
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices.front(), c10::Device(c10::kCUDA, 1));
}

}  // namespace
}  // namespace otf

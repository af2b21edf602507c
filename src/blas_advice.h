// LibTorch's float32 matrix products go through the BLAS it was built with: MKL inside PyPI's
// LibTorch, the system's OpenBLAS in Debian's. An OpenBLAS that does not recognise the CPU falls
// back to generic kernels: Debian 12's OpenBLAS 0.3.21 runs its "Prescott" (SSE3) kernels on
// Xeons of the AVX-512 FP16 generation, 3-7x slower than its AVX-512 ones
// (docs/libtorch-versions.md). This detects it, so that the plugin says what to set instead of
// running silently slow.
#pragma once

#include <optional>
#include <string>

namespace otf {

struct CpuVectorFeatures {
  bool avx2 = false;
  bool avx512f = false;
};

CpuVectorFeatures cpu_vector_features();

// The kernel set ("core") of the OpenBLAS loaded in this process, e.g. "SkylakeX" or "Prescott";
// nullopt when no OpenBLAS is loaded (LibTorch with MKL).
std::optional<std::string> openblas_core_name();

// What to do when `core` is a kernel set without AVX2 while `cpu` has AVX2 or AVX-512: one
// sentence naming the core and the OPENBLAS_CORETYPE to set; nullopt when the core fits the CPU.
std::optional<std::string> openblas_core_advice(const std::string& core, const CpuVectorFeatures& cpu);

// openblas_core_advice for this process's OpenBLAS and CPU; nullopt without OpenBLAS.
std::optional<std::string> blas_advice();

}  // namespace otf

#include "blas_advice.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

namespace otf {

CpuVectorFeatures cpu_vector_features() {
  CpuVectorFeatures features;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  features.avx2 = __builtin_cpu_supports("avx2");
  features.avx512f = __builtin_cpu_supports("avx512f");
#endif
  return features;
}

std::optional<std::string> openblas_core_name() {
  // Looked up at run time: OpenBLAS is LibTorch's dependency, not ours, and may be absent.
  using CoreNameFunction = char* (*)();
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_get_corename");
  if (symbol == nullptr) return std::nullopt;
  const char* name = reinterpret_cast<CoreNameFunction>(symbol)();
  if (name == nullptr) return std::nullopt;
  return std::string(name);
}

std::optional<std::string> openblas_core_advice(const std::string& core, const CpuVectorFeatures& cpu) {
  // OpenBLAS' x86 kernel sets older than Haswell's AVX2 ones (its cpuid names, any case).
  static constexpr std::array<std::string_view, 21> kPreAvx2Cores = {
      "prescott", "core2",   "penryn",       "dunnington", "nehalem",   "atom",    "katmai",
      "coppermine", "northwood", "banias",   "athlon",     "opteron",   "opteron_sse3",
      "barcelona", "bobcat",  "sandybridge", "bulldozer",  "piledriver", "steamroller",
      "excavator", "unknown"};
  if (!cpu.avx2) return std::nullopt;
  std::string lower = core;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (std::find(kPreAvx2Cores.begin(), kPreAvx2Cores.end(), lower) == kPreAvx2Cores.end()) return std::nullopt;
  const char* coretype = cpu.avx512f ? "SKYLAKEX" : "HASWELL";
  return "OpenBLAS (LibTorch's float32 matrix products) runs its generic '" + core + "' kernels on this " +
         (cpu.avx512f ? std::string("AVX-512") : std::string("AVX2")) + " CPU: set OPENBLAS_CORETYPE=" +
         coretype + " before starting LAMMPS (3-7x faster float32 products on such CPUs; "
         "docs/libtorch-versions.md)";
}

std::optional<std::string> blas_advice() {
  const std::optional<std::string> core = openblas_core_name();
  if (!core) return std::nullopt;
  return openblas_core_advice(*core, cpu_vector_features());
}

}  // namespace otf

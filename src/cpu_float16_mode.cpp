#include "cpu_float16_mode.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "torch_compat.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace otf {
namespace {

// Unset until the first read or set, so that the environment is read once, lazily.
std::atomic<int> selected_mode{-1};

std::optional<CpuFloat16Mode> mode_from_environment() {
  const char* text = std::getenv("OTF_CPU_FLOAT16");
  if (text == nullptr || *text == '\0') return std::nullopt;
  try {
    return parse_cpu_float16_mode(text);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(std::string("environment variable OTF_CPU_FLOAT16: ") +
                                error.what());
  }
}

void check_available(CpuFloat16Mode mode) {
  if (mode == CpuFloat16Mode::Native && !native_cpu_float16_available()) {
    throw std::invalid_argument(
        "CPU float16 mode 'native' needs LibTorch 2.x (this one has no CPU float16 autocast); "
        "use 'emulated'");
  }
}

}  // namespace

std::string to_string(CpuFloat16Mode mode) {
  return mode == CpuFloat16Mode::Native ? "native" : "emulated";
}

CpuFloat16Mode parse_cpu_float16_mode(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "native") return CpuFloat16Mode::Native;
  if (lower == "emulated") return CpuFloat16Mode::Emulated;
  throw std::invalid_argument("CPU float16 mode '" + std::string(text) +
                              "': accepted values are native and emulated");
}

bool native_cpu_float16_available() { return torch_compat::has_native_cpu_float16_autocast(); }

bool cpu_has_float16_arithmetic() {
#if defined(__x86_64__) || defined(__i386__)
  // Intel SDM, CPUID leaf 7: subleaf 0 EDX bit 23 is AVX512-FP16, subleaf 1 EAX bit 21 AMX-FP16.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23)) != 0) return true;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 21)) != 0) return true;
#endif
  // Other architectures are not measured yet: emulation stays the default there.
  return false;
}

CpuFloat16Mode default_cpu_float16_mode() {
  if (const auto chosen = mode_from_environment()) {
    check_available(*chosen);
    return *chosen;
  }
  return native_cpu_float16_available() && cpu_has_float16_arithmetic() ? CpuFloat16Mode::Native
                                                                        : CpuFloat16Mode::Emulated;
}

CpuFloat16Mode cpu_float16_mode() {
  int mode = selected_mode.load();
  if (mode < 0) {
    int unset = -1;
    selected_mode.compare_exchange_strong(unset, static_cast<int>(default_cpu_float16_mode()));
    mode = selected_mode.load();
  }
  return static_cast<CpuFloat16Mode>(mode);
}

void set_cpu_float16_mode(CpuFloat16Mode mode) {
  check_available(mode);
  selected_mode.store(static_cast<int>(mode));
}

}  // namespace otf

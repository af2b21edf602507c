// How a CPU float16 autocast region computes: natively in Half (LibTorch 2.x) or emulated with
// float32 storage and Half rounding (cpu_autocast_policy.h; the only way on LibTorch 1.13). Both
// give fp16 results (range, rounding, overflow); they differ in speed, which depends on the CPU.
#pragma once

#include <string>
#include <string_view>

namespace otf {

enum class CpuFloat16Mode { Native, Emulated };

// "native" / "emulated"; parse_cpu_float16_mode accepts them in any letter case and throws
// std::invalid_argument listing them for anything else.
std::string to_string(CpuFloat16Mode mode);
CpuFloat16Mode parse_cpu_float16_mode(std::string_view text);

// Whether this LibTorch can run CPU float16 autocast natively (2.x: yes; 1.13: no).
bool native_cpu_float16_available();

// Whether the CPU executes float16 arithmetic in hardware (AVX512-FP16 or AMX-FP16, read with
// cpuid). Without it LibTorch's Half kernels convert element by element: measured on an AVX2 EPYC
// with LibTorch 2.15, a force-training step ran 3.8-10x slower native than emulated
// (docs/libtorch-versions.md).
bool cpu_has_float16_arithmetic();

// Native when LibTorch has it and the CPU has float16 arithmetic, else Emulated. The environment
// variable OTF_CPU_FLOAT16=native|emulated overrides the rule (native on 1.13 is an error).
CpuFloat16Mode default_cpu_float16_mode();

// The process-wide mode read by CPU float16 regions when they enter; default_cpu_float16_mode()
// until set. Setting Native on LibTorch 1.13 throws std::invalid_argument. Change it between
// regions, not while one is entered on another thread.
CpuFloat16Mode cpu_float16_mode();
void set_cpu_float16_mode(CpuFloat16Mode mode);

}  // namespace otf

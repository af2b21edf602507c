// OTF-Torch's CPU autocast policy for LibTorch 1.13: kernels on the AutocastCPU dispatch key that
// emulate float16 autocast with real fp16 rounding (1.13 has no CPU fp16 autocast), keep
// reductions and other range-sensitive ops in float32 as CUDA does, and fix the cast-cache trap of
// no-grad passes. AutocastRegion installs and drives it; other code rarely needs this header.
#pragma once

#include <string_view>
#include <vector>

namespace otf {

// Registers the kernels below once per process (idempotent and thread-safe). LibTorch's own
// AutocastCPU kernels for the lower-precision ops are overridden; the "Overriding a previously
// registered kernel" warning this triggers is silenced. AutocastRegion calls it when a CPU region
// is constructed. Call it yourself before starting worker threads that run forwards: the
// dispatcher tables should not change while other threads dispatch.
//
// The kernels act only while LibTorch's CPU autocast is enabled on the calling thread
// (torch_compat::is_autocast_enabled(kCPU)), whoever enabled it; with the fp16 emulation flag off
// they cast to the CPU autocast dtype (bfloat16, or float16 in native mode, cpu_float16_mode.h)
// like LibTorch's own policy, plus the float32 and promote lists below.
void install_cpu_autocast_policy();

// Thread-local switch read by the lower-precision kernels, set by AutocastRegion for a CPU
// float16 region: matrix-product operands and results are rounded through Half
// (t.to(kHalf).to(kFloat)) while storage stays float32, so fp16 overflow (above 65504 -> inf),
// underflow (subnormal below 6.1e-5, 0 below 3e-8) and rounding happen for real in forward and
// backward, and the elementwise ops 1.13 cannot run in Half on CPU (tanh, silu...) still run.
bool is_cpu_fp16_emulation_enabled();
void set_cpu_fp16_emulation_enabled(bool enabled);

// The schema names ("mm", "conv1d.padding", in namespace aten) each policy is registered for;
// the table in autocast_region.h says what they mean. Only functional overloads are listed:
// in-place and out= variants are never autocast (docs/design.md §7.2, A8), so e.g. "sum" covers
// sum and sum.dim_IntList (and sum.dim_DimnameList where LibTorch still has named-dimension
// overloads, torch_compat.h) but not sum.IntList_out.
//   lower precision: exactly LibTorch 1.13's CPU lower_precision_fp list
//                    (docs/design.md §7.2);
//   float32:         CUDA's fp32 and fp32_set_opt_dtype/fp32_append_dtype lists for ops that
//                    have no AutocastCPU kernel in 1.13, plus mean and conv_transpose (float32
//                    in 1.13's CPU policy, kept so with 2.x) (docs/design.md §7.2);
//   promote:         CUDA's promote ops whose CPU kernels reject mixed dtypes, plus index_add
//                    (docs/design.md §7.8, pitfall 2).
const std::vector<std::string_view>& cpu_lower_precision_ops();
const std::vector<std::string_view>& cpu_float32_ops();
const std::vector<std::string_view>& cpu_promote_ops();

}  // namespace otf

// An autocast region: the C++ counterpart of Python's `with torch.autocast(device, dtype):` for a
// training precision (float32, bfloat16, float16) on one device. Forward passes and losses run
// inside it; backward and optimizer steps run outside. LibTorch 1.13 has no such guard in C++.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <mutex>
#include <utility>

#include "precision_dtype.h"

namespace otf {

// Which ops run in which precision inside an enabled region. CUDA uses LibTorch's own kernels
// (docs/design.md §7.2); the CPU lists are in cpu_autocast_policy.h/.cpp and are LibTorch 1.13's
// CPU policy extended towards CUDA's.
//
// | ops                                  | BFloat16 CPU | Float16 CPU (emulated; | CUDA bf16/fp16 |
// |                                      |              | native: float16)       |                |
// |--------------------------------------|--------------|------------------------|----------------|
// | mm addmm bmm baddbmm addbmm matmul   | bfloat16     | float32 storage;       | bf16 / fp16    |
// | linear conv1d/2d/3d (+.padding)      |              | operands and results   | (CUDA also:    |
// | conv_tbc _convolution.deprecated,    |              | rounded through Half,  | mv addmv addr  |
// | and what calls them (einsum,         |              | float32 accumulation,  | prelu einsum   |
// | tensordot, nn::Linear)               |              | gradients via Half too | conv_transpose |
// |                                      |              |                        | RNN cells)     |
// | sum mean cumsum cumprod softmax      | float32      | float32                | float32        |
// | log_softmax logsumexp norm layer_norm|              |                        |                |
// | group_norm exp log* pow rsqrt ...    |              |                        |                |
// | LibTorch's CPU fp32 list: losses,    | float32      | float32                | float32        |
// | linalg, fft, conv_transpose*, prod   |              |                        | (CUDA's list)  |
// | cat stack index_copy cross dot       | widest input | widest input           | widest input   |
// | index_put index_add scatter_add      |              |                        |                |
// | everything else (silu tanh add mul)  | input dtype  | input dtype (float32)  | input dtype    |
//
// Float32 runs everything in the input dtype: no autocast at all.
// Why: reductions that feed energies stay float32 or wider in every mode (docs/design.md §7.8,
// pitfall 1: a bf16 sum of 1000 x -5.0 is -4992); fp32 layer_norm accepts bf16 activations with
// fp32 weights (pitfall 4); promote ops accept a float32 buffer and bf16 contributions (pitfall 2).
// Differences from CUDA kept on purpose: mv, addmv, addr, dot and conv_transpose stay float32 on
// CPU, as in LibTorch 1.13's CPU policy. Under fp16 emulation the in-place bias add that
// torch::nn::functional::linear does after matmul for 1-D/3-D input runs in float32 and is not
// re-rounded (real fp16 would round it once more); the 2-D path (addmm) is fully rounded.
//
// CPU float16 has two modes (cpu_float16_mode.h). Native (LibTorch 2.x): the CPU autocast dtype is
// Half and the lower-precision ops run in Half. Emulated, the only mode on 1.13
// (set_autocast_cpu_dtype(kHalf) throws, Half matmul and tanh are not implemented on CPU,
// docs/design.md §7.4), and the default on CPUs without float16 arithmetic: the region enables
// the CPU autocast key with its dtype left at bfloat16 and sets the thread-local emulation flag
// that the lower-precision kernels read; results are exactly Half-representable, overflow to inf
// above 65504 and flush to 0 below 6e-8, in forward and backward, so GradScaler is exercised on CPU.
// Emulated casts are not cached (the cast cache holds only LibTorch's bfloat16 casts).
//
// Rules for callers, as for torch.autocast:
// * Keep backward() and autograd::grad() outside the region (docs/design.md §7.7, pitfall 5):
//   backward ops run in the dtype their forward used anyway.
// * Do not let a region span optimizer.step(): casts of a weight cached in the region are not
//   invalidated by in-place updates (pitfall 8). exit() + enter() starts with a fresh cache.
// * State is per thread (pitfall 9): a region affects only the thread that entered it, and
//   regions on a thread must be exited in the reverse order of entering.
// * On CPU a no-grad pass (validation) inside the region does not poison the cast cache: the
//   kernels do not cache casts made with grad mode off (pitfall 7). CUDA uses LibTorch's kernels,
//   which do: there, exit() + enter() between a no-grad pass and a training forward, or
//   cache_enabled = false.

struct AutocastOptions {
  // false makes a region that turns autocast off for its scope, inside an enabled one (A9).
  bool enabled = true;
  // LibTorch's cast cache for the bfloat16 casts of leaf weights, as torch.autocast's
  // cache_enabled; the cache is cleared when the outermost region of the thread exits.
  bool cache_enabled = true;
};

class AutocastRegion {
 public:
  // Enters at once: { AutocastRegion region(device, precision); forward(); }
  AutocastRegion(c10::Device device, Precision precision, AutocastOptions options = {});
  // Constructed exited, as std::unique_lock with std::defer_lock: for an owner that enters and
  // exits the same region once per batch (the mixed-precision hook).
  AutocastRegion(c10::Device device, Precision precision, std::defer_lock_t,
                 AutocastOptions options = {});
  // A region that turns autocast off on `device` for its scope (torch.autocast(enabled=False)).
  static AutocastRegion disabled(c10::Device device);

  // Exits if still entered.
  ~AutocastRegion();

  // The saved state belongs to the entering thread and to this object's place in the nesting.
  AutocastRegion(const AutocastRegion&) = delete;
  AutocastRegion& operator=(const AutocastRegion&) = delete;
  AutocastRegion(AutocastRegion&&) = delete;
  AutocastRegion& operator=(AutocastRegion&&) = delete;

  // torch.autocast.__enter__: saves the device type's enabled flag, dtype and cache flag (and the
  // fp16 emulation flag on CPU), sets them, increments the nesting depth. No-op when entered.
  void enter();
  // torch.autocast.__exit__: decrements the nesting depth, clears the cast cache when it reaches
  // 0, restores the saved state. No-op when not entered. Throws std::logic_error if this region
  // is not the innermost one entered on the calling thread (wrong thread or wrong order).
  void exit();

  bool is_entered() const { return entered_; }
  // False for an enabled Float32 region: it never touches autocast state.
  bool changes_autocast_state() const;
  c10::Device device() const { return device_; }
  Precision precision() const { return precision_; }
  const AutocastOptions& options() const { return options_; }

 private:
  struct SavedState {
    bool enabled = false;
    c10::ScalarType lower_precision_dtype = c10::ScalarType::Undefined;
    bool cache_enabled = true;
    bool cpu_fp16_emulation = false;
  };

  void save_state();
  void apply_state() const;
  void restore_state() const;

  c10::Device device_;
  Precision precision_;
  AutocastOptions options_;
  bool entered_ = false;
  SavedState saved_;
  const AutocastRegion* enclosing_region_ = nullptr;  // innermost region when this one entered
};

// The dtype a loss between `prediction` and `target` is computed in: the widest of float32 and
// both dtypes (float64 stays float64).
c10::ScalarType loss_dtype(c10::ScalarType prediction, c10::ScalarType target);

// Both tensors cast to loss_dtype. For losses computed outside a region on its outputs: in
// LibTorch 1.13 mse_loss(bf16 prediction, fp32 target) runs forward but its backward throws
// "Found dtype Float but expected BFloat16" (docs/design.md §7.8, pitfall 3). The casts are
// differentiable.
std::pair<at::Tensor, at::Tensor> widen_for_loss(const at::Tensor& prediction,
                                                 const at::Tensor& target);

}  // namespace otf

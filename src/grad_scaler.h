// GradScaler: dynamic loss scaling for mixed-precision training, a C++ port of PyTorch's
// torch.amp.GradScaler. It scales the loss so low-precision gradients do not underflow, and skips
// the optimizer steps whose gradients overflowed while adapting the scale.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include "grad_scaler_options.h"

namespace otf {

// What PyTorch's GradScaler.state_dict() holds (keys "scale", "growth_factor", "backoff_factor",
// "growth_interval", "_growth_tracker").
struct GradScalerState {
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t growth_tracker = 0;
};

// Equivalent of torch._amp_foreach_non_finite_check_and_unscale_ (the per-tensor half of
// GradScaler._unscale_grads_), written with plain tensor ops because LibTorch 1.13 has no CPU
// kernel for it. For every defined grad (the values of a sparse one): found_inf is set to 1 if any
// element is inf or NaN, then every element is multiplied by inv_scale in fp32 (fp64 for double
// grads) and rounded once to the grad's dtype. Grads are unscaled even when a non-finite value is
// found; found_inf is only ever set, so the caller zeroes it. Undefined grads are skipped.
// Sparse fp16 grads must already be coalesced (unscale_optimizer_grads_and_check_finite does it).
// Throws std::invalid_argument("Attempting to unscale FP16 gradients.") for an fp16 grad unless
// allow_fp16, before any grad is modified.
void unscale_grads_and_check_finite(at::TensorList grads, const torch::Tensor& inv_scale,
                                    torch::Tensor& found_inf, bool allow_fp16);

// Equivalent of GradScaler._unscale_grads_: unscales the grads of every parameter of every param
// group of the optimizer. Sparse fp16 grads are first replaced by their coalesced form, because
// duplicate indices that are finite apart can overflow once summed. Returns whether any parameter
// had a grad (PyTorch's "found_inf_per_device" map being non-empty).
bool unscale_optimizer_grads_and_check_finite(torch::optim::Optimizer& optimizer,
                                              const torch::Tensor& inv_scale,
                                              torch::Tensor& found_inf, bool allow_fp16);

// Equivalent of torch._amp_update_scale_ (same checks and messages as its 2.3 CPU kernel).
// found_inf != 0: scale *= backoff_factor, tracker = 0. Otherwise the tracker counts successful
// steps and, on reaching growth_interval, the scale grows by growth_factor unless that would make
// it inf, and the tracker restarts at 0. Products are taken in double and rounded to float.
// scale: one-element float32; growth_tracker: one-element int32; found_inf: one-element float32.
void update_scale_and_growth_tracker(torch::Tensor& scale, torch::Tensor& growth_tracker,
                                     const torch::Tensor& found_inf, double growth_factor,
                                     double backoff_factor, int64_t growth_interval);

// Errors carry PyTorch's message text. PyTorch's ValueError and argument assertions become
// std::invalid_argument; its RuntimeError and call-order assertions become std::runtime_error.
class GradScaler {
 public:
  // Receives each optimizer's found_inf (0-dim float32 on the scale's device, 0 or 1 on this
  // process) right after unscale_ computes it, so a distributed layer can all-reduce it (sum or
  // max) and every rank takes the same skip decision. Called once per optimizer per iteration on
  // every process that calls unscale_/step, also when the optimizer has no grads.
  using FoundInfReducer = std::function<void(torch::Tensor& found_inf)>;

  // Throws std::invalid_argument when enabled and growth_factor <= 1 or backoff_factor >= 1.
  explicit GradScaler(GradScalerOptions options = {});

  // The scale tensor is shared state; copying would let two scalers write it.
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;
  GradScaler(GradScaler&&) = default;
  GradScaler& operator=(GradScaler&&) = default;

  // outputs * scale, out of place and differentiable. The first call creates the scale on the
  // device of outputs. Disabled: returns outputs itself.
  torch::Tensor scale(const torch::Tensor& outputs);
  // Same for any nesting of Tensor, tensor lists, generic lists and tuples; returns the same
  // structure. Anything else throws std::invalid_argument.
  c10::IValue scale(const c10::IValue& outputs);

  // Divides the optimizer's grads by the scale in place and records whether any was inf/NaN.
  // At most once per optimizer between two update() calls, and not after step().
  void unscale_(torch::optim::Optimizer& optimizer);

  // Unscales (unless unscale_ already did) and runs optimizer.step() only if no grad was inf/NaN.
  // Returns whether optimizer.step() ran. Disabled: runs optimizer.step() and returns true.
  bool step(torch::optim::Optimizer& optimizer);
  // Closures re-evaluate the loss unscaled, so PyTorch rejects them while scaling is enabled.
  // Disabled: returns optimizer.step(closure).
  torch::Tensor step(torch::optim::Optimizer& optimizer,
                     const torch::optim::Optimizer::LossClosure& closure);

  // Backs off once if any optimizer found inf/NaN this iteration, otherwise counts towards growth;
  // then forgets this iteration's per-optimizer state. Call once per iteration, after all steps.
  void update();
  // Sets the scale (rounded to float32) instead; the growth tracker is left unchanged.
  void update(double new_scale);
  // new_scale: one-element float32 tensor without requires_grad on the scaler's device type.
  void update(const torch::Tensor& new_scale);

  // Default: none (single process).
  void set_found_inf_reducer(FoundInfReducer reducer);

  // 1.0 when disabled; init_scale exactly before the first scale(); the float32 scale afterwards.
  double get_scale() const;
  // 0 when disabled; the initial tracker before the first scale().
  int64_t get_growth_tracker() const;
  double get_growth_factor() const;
  void set_growth_factor(double growth_factor);
  double get_backoff_factor() const;
  void set_backoff_factor(double backoff_factor);
  int64_t get_growth_interval() const;
  void set_growth_interval(int64_t growth_interval);
  bool is_enabled() const;

  // The 0-dim float32 scale and 0-dim int32 tracker; undefined before the first scale().
  const torch::Tensor& scale_tensor() const;
  const torch::Tensor& growth_tracker_tensor() const;

  // Empty for a disabled scaler, as PyTorch's {}. Take it after update().
  std::optional<GradScalerState> state_dict() const;
  // No-op when disabled. Throws std::runtime_error for an empty state on an enabled scaler.
  void load_state_dict(const std::optional<GradScalerState>& state);

  // Checkpointing through torch::serialize with state_dict()'s keys and exact double/int64 values.
  // A disabled scaler writes nothing; load() treats an archive without "scale" as an empty state.
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  // PyTorch's OptState.
  enum class OptimizerStage { kReady, kUnscaled, kStepped };

  struct PerOptimizerState {
    OptimizerStage stage = OptimizerStage::kReady;
    // Undefined while no grad of the optimizer has been checked this iteration.
    torch::Tensor found_inf;
  };

  void lazy_init_scale_and_growth_tracker(const c10::Device& device);
  void check_initialized(const char* function_name) const;
  c10::IValue scale_nested(const c10::IValue& outputs);
  torch::Tensor scale_single(const torch::Tensor& output);
  PerOptimizerState& state_of(const torch::optim::Optimizer& optimizer);

  double init_scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  bool enabled_;
  torch::Tensor scale_;
  torch::Tensor growth_tracker_;
  // Keyed by address, as PyTorch keys by id(optimizer); the optimizers are borrowed.
  std::unordered_map<const torch::optim::Optimizer*, PerOptimizerState> per_optimizer_states_;
  FoundInfReducer found_inf_reducer_;
};

}  // namespace otf

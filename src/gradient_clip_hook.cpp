#include "gradient_clip_hook.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/types.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "training_update_orchestrator.h"

namespace otf {
namespace {

// The total norm exactly as clip_grad_norm_ computes it (LibTorch 1.13, clip_grad.h), for the
// rare call where it throws and does not return it.
double total_gradient_norm(const std::vector<torch::Tensor>& parameters, double norm_type) {
  std::vector<torch::Tensor> norms;
  for (const torch::Tensor& parameter : parameters) {
    const torch::Tensor& grad = parameter.grad();
    if (!grad.defined()) continue;
    norms.push_back(std::isinf(norm_type) ? grad.detach().abs().max()
                                          : grad.detach().norm(norm_type));
  }
  if (norms.empty()) return 0.0;
  const torch::Tensor stacked = torch::stack(norms);
  return (std::isinf(norm_type) ? stacked.max() : stacked.norm(norm_type)).item<double>();
}

// Clips with clip_grad_norm_ unless the total norm is not finite, in which case nothing is touched
// (error_if_nonfinite: clip_grad_norm_ checks the norm before it scales anything). Returns the
// total norm either way.
double clip_unless_norm_is_non_finite(const std::vector<torch::Tensor>& parameters, double max_norm,
                                      double norm_type) {
  try {
    return torch::nn::utils::clip_grad_norm_(parameters, max_norm, norm_type,
                                             /*error_if_nonfinite=*/true);
  } catch (const c10::Error&) {
    const double total_norm = total_gradient_norm(parameters, norm_type);
    if (std::isfinite(total_norm)) throw;  // some other failure: not ours to hide
    return total_norm;
  }
}

}  // namespace

GradientClipHook::GradientClipHook(double max_norm, double norm_type)
    : TrainingUpdateHook(kPriority, std::string(kExclusiveKey)),
      max_norm_(max_norm),
      norm_type_(norm_type) {
  if (!(std::isfinite(max_norm_) && max_norm_ > 0.0)) {
    throw std::invalid_argument("GradientClipHook: max_norm must be finite and > 0, got " +
                                std::to_string(max_norm_));
  }
  if (!(norm_type_ > 0.0)) {  // also rejects NaN; +infinity (the max norm) is accepted
    throw std::invalid_argument(
        "GradientClipHook: norm_type must be > 0 (2 for the Euclidean "
        "norm, infinity for the max norm), got " +
        std::to_string(norm_type_));
  }
}

UpdateResult GradientClipHook::call(TrainContext& ctx, TrainingStage stage, bool will_skip) {
  // will_skip: no step will consume these gradients (an accumulation micro-batch keeps adding to
  // them, still scaled under float16), so they must not be touched (docs/design.md §5.2).
  if (stage == TrainingStage::DoOptimizerStep && !will_skip) clip(ctx);
  return {true, ctx.loss};
}

void GradientClipHook::clip(const TrainContext& ctx) {
  // Each parameter once, even when it sits in two groups or two optimizers: clipping it twice
  // would scale it twice.
  const std::vector<torch::Tensor> parameters = optimizer_parameters(ctx.optimizers);
  last_total_norm_ = clip_unless_norm_is_non_finite(parameters, max_norm_, norm_type_);
  if (std::isfinite(*last_total_norm_)) return;

  // Some gradient is inf/NaN. The GradScaler skips the optimizers that hold one but steps the
  // others (docs/design.md §5.5), so the finite gradients are clipped among themselves: no
  // optimizer steps on a gradient norm above max_norm.
  std::vector<torch::Tensor> with_finite_gradient;
  std::size_t with_gradient = 0;
  for (const torch::Tensor& parameter : parameters) {
    const torch::Tensor& grad = parameter.grad();
    if (!grad.defined()) continue;
    ++with_gradient;
    if (grad.isfinite().all().item<bool>()) with_finite_gradient.push_back(parameter);
  }
  // All finite but the norm overflowed (float32 gradients near 1e38): no meaningful coefficient.
  if (with_finite_gradient.empty() || with_finite_gradient.size() == with_gradient) return;
  clip_unless_norm_is_non_finite(with_finite_gradient, max_norm_, norm_type_);
}

}  // namespace otf

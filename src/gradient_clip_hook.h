// Gradient-norm clipping as an update hook: just before the optimizer step, the total norm of all
// gradients the optimizers will consume is scaled down to max_norm when it is larger (the
// reference toolkit's MACE-example GradientClipHook, on torch::nn::utils::clip_grad_norm_;
// docs/design.md §5.7).
#pragma once

#include <optional>

#include "train_context.h"
#include "training_stage.h"
#include "training_update_hook.h"

namespace otf {

// At DO_OPTIMIZER_STEP, unless will_skip (an earlier hook vetoed the step, e.g. an intermediate
// accumulation micro-batch), gathers every parameter of every param group of every optimizer in
// ctx.optimizers, each once, and clips the gradients of those that have one to a total norm of
// max_norm (PyTorch's formula: gradients times min(1, max_norm / (total_norm + 1e-6))). Every other
// stage does nothing. Never vetoes.
//
// Priority 30 puts it after MixedPrecisionHook (20), whose unscale_ runs at the same stage: the
// clip sees the true, unscaled gradients (docs/design.md §7.5).
//
// Non-finite total norm (inf/NaN gradients, e.g. a float16 overflow): nothing throws, and
// last_total_norm() reports the non-finite norm. PyTorch's clip would multiply every gradient by
// max_norm / inf = 0 (finite ones zeroed, inf ones turned into NaN) or by NaN. Instead the inf/NaN
// gradients are left as they are: under float16 the GradScaler already found them at unscale_ and
// skips the optimizers holding them, and the next group starts from zeroed gradients. The
// parameters whose gradients are entirely finite are clipped among themselves, because the scaler
// still steps the optimizers whose gradients are all finite (docs/design.md §5.5). Without a
// GradScaler an optimizer consumes its inf/NaN gradients, as it would without this hook: clipping
// cannot repair them. When every gradient is finite but the norm itself overflows, nothing is
// touched.
class GradientClipHook final : public TrainingUpdateHook {
 public:
  // After mixed precision's unscale_ (20), before spike skipping (40).
  static constexpr int kPriority = 30;
  // Two clip hooks would clip twice, and the smaller max_norm would silently win.
  static constexpr const char* kExclusiveKey = "GradientClipHook";

  // max_norm: finite and > 0. norm_type: the p of the p-norm, > 0, or infinity for the max norm.
  // Otherwise std::invalid_argument.
  explicit GradientClipHook(double max_norm, double norm_type = 2.0);

  double max_norm() const { return max_norm_; }
  double norm_type() const { return norm_type_; }
  // The total norm before clipping at the last clip (0 when no parameter had a gradient);
  // nullopt until the first clip. Not updated on skipped stages.
  std::optional<double> last_total_norm() const { return last_total_norm_; }

  UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip) override;

 private:
  void clip(const TrainContext& ctx);

  double max_norm_;
  double norm_type_;
  std::optional<double> last_total_norm_;
};

}  // namespace otf

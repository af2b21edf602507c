// A guard against divergence in every precision: an optimizer step whose loss or gradients hold
// inf or NaN is vetoed, as the GradScaler skips such steps under float16 (docs/design.md §5.2),
// so non-finite numbers never reach the weights. Without it, float32 and bfloat16 training would
// step on NaN gradients and spread NaN into every weight.
#pragma once

#include <cstdint>

#include "train_context.h"
#include "training_stage.h"
#include "training_update_hook.h"

namespace otf {

// At DO_OPTIMIZER_STEP, unless an earlier hook vetoed (will_skip: an accumulation micro-batch),
// checks the loss and every gradient the optimizers would consume; any inf/NaN vetoes the step.
// Gradients are already summed over data-parallel ranks there, so every rank decides alike. The
// next batch's zero_grad drops the vetoed gradients. Under float16 leave this hook out: the
// GradScaler's own skip must see the overflow to back off its scale.
class NonFiniteStepHook final : public TrainingUpdateHook {
 public:
  // The spike-skipping bucket: after mixed precision's unscale (20) and clipping (30).
  static constexpr int kPriority = 40;
  static constexpr const char* kExclusiveKey = "NonFiniteStepHook";

  NonFiniteStepHook();

  UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip) override;

  // Steps vetoed so far, and how many of the last checked steps in a row were vetoed.
  int64_t vetoed_steps() const { return vetoed_steps_; }
  int64_t consecutive_vetoes() const { return consecutive_vetoes_; }

 private:
  int64_t vetoed_steps_ = 0;
  int64_t consecutive_vetoes_ = 0;
};

}  // namespace otf

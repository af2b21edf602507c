#include "non_finite_step_hook.h"

#include <string>
#include <vector>

#include "training_update_orchestrator.h"

namespace otf {

NonFiniteStepHook::NonFiniteStepHook()
    : TrainingUpdateHook(kPriority, std::string(kExclusiveKey)) {}

UpdateResult NonFiniteStepHook::call(TrainContext& ctx, TrainingStage stage, bool will_skip) {
  if (stage != TrainingStage::DoOptimizerStep || will_skip) return {true, ctx.loss};
  bool finite = !ctx.loss.defined() || ctx.loss.detach().isfinite().all().item<bool>();
  for (const torch::Tensor& parameter : optimizer_parameters(ctx.optimizers)) {
    if (!finite) break;
    const torch::Tensor& grad = parameter.grad();
    if (grad.defined() && !grad.detach().isfinite().all().item<bool>()) finite = false;
  }
  if (finite) {
    consecutive_vetoes_ = 0;
  } else {
    ++vetoed_steps_;
    ++consecutive_vetoes_;
  }
  return {finite, ctx.loss};
}

}  // namespace otf

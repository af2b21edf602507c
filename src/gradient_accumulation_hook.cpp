#include "gradient_accumulation_hook.h"

#include <stdexcept>
#include <string>

namespace otf {
namespace {

constexpr const char* kStepsKey = "steps";
constexpr const char* kMicroBatchKey = "micro_batch_in_group";

}  // namespace

GradientAccumulationHook::GradientAccumulationHook(int64_t steps)
    : TrainingUpdateHook(kPriority, std::string(kExclusiveKey)), steps_(steps) {
  if (steps_ < 1) {
    throw std::invalid_argument(
        "GradientAccumulationHook: steps must be >= 1 (micro-batches per "
        "optimizer step; 1 disables accumulation), got " +
        std::to_string(steps_));
  }
}

UpdateResult GradientAccumulationHook::call(TrainContext& ctx, TrainingStage stage,
                                            bool /*will_skip*/) {
  switch (stage) {
    case TrainingStage::BeforeBatch:
      return {micro_batch_in_group_ == 0, ctx.loss};
    case TrainingStage::DoBackward:
      // An undefined loss is passed on as is, for the orchestrator to report.
      if (steps_ == 1 || !ctx.loss.defined()) return {true, ctx.loss};
      return {true, ctx.loss / static_cast<double>(steps_)};
    case TrainingStage::DoOptimizerStep:
      return {completes_group(), ctx.loss};
    case TrainingStage::AfterOptimizerStep:
      micro_batch_in_group_ = (micro_batch_in_group_ + 1) % steps_;
      return {true, ctx.loss};
    default:
      return {true, ctx.loss};
  }
}

void GradientAccumulationHook::save(torch::serialize::OutputArchive& archive) const {
  archive.write(kStepsKey, c10::IValue(steps_));
  archive.write(kMicroBatchKey, c10::IValue(micro_batch_in_group_));
}

void GradientAccumulationHook::load(torch::serialize::InputArchive& archive) {
  c10::IValue steps;
  if (archive.try_read(kStepsKey, steps) && steps.toInt() != steps_) {
    // Resuming mid-group with another group size would step on a partial mean gradient.
    throw std::invalid_argument(
        "GradientAccumulationHook checkpoint conflict: steps=" + std::to_string(steps.toInt()) +
        " vs constructor steps=" + std::to_string(steps_) +
        "; construct the hook with matching steps to resume this "
        "checkpoint.");
  }
  c10::IValue micro_batch;
  if (!archive.try_read(kMicroBatchKey, micro_batch)) return;
  const int64_t position = micro_batch.toInt();
  if (position < 0 || position >= steps_) {
    throw std::invalid_argument(
        "GradientAccumulationHook checkpoint: micro_batch_in_group=" + std::to_string(position) +
        " is outside 0.." + std::to_string(steps_ - 1));
  }
  micro_batch_in_group_ = position;
}

}  // namespace otf

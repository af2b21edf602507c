#include "training_update_hook.h"

#include <utility>

#include "hook.h"

namespace otf {

TrainingUpdateHook::TrainingUpdateHook(int priority, std::optional<std::string> exclusive_key)
    : priority_(priority), exclusive_key_(std::move(exclusive_key)) {}

bool TrainingUpdateHook::runs_on_stage(TrainingStage stage) {
  return stage == TrainingStage::BeforeBatch || stage == TrainingStage::DoBackward ||
         stage == TrainingStage::DoOptimizerStep || stage == TrainingStage::AfterOptimizerStep;
}

UpdateResult TrainingUpdateHook::call(TrainContext& ctx, TrainingStage /*stage*/,
                                      bool /*will_skip*/) {
  return {true, ctx.loss};
}

std::string TrainingUpdateHook::name() const { return readable_type_name(typeid(*this)); }

}  // namespace otf

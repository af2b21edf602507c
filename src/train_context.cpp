#include "train_context.h"

#include "training_strategy.h"

namespace otf {

bool TrainingCounters::operator==(const TrainingCounters& other) const {
  return step_count == other.step_count && global_step_count == other.global_step_count &&
         batch_count == other.batch_count && epoch_step_count == other.epoch_step_count &&
         epoch == other.epoch;
}

std::vector<c10::Device> TrainContext::devices() const {
  if (workflow != nullptr) return workflow->devices();
  return {c10::Device(c10::kCPU)};
}

}  // namespace otf

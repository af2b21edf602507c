#include "training_stage.h"

#include <ostream>
#include <stdexcept>
#include <utility>

namespace otf {
namespace {

constexpr std::array<std::pair<TrainingStage, std::string_view>, kTrainingStageCount> kNames{{
    {TrainingStage::Setup, "SETUP"},
    {TrainingStage::BeforeTraining, "BEFORE_TRAINING"},
    {TrainingStage::BeforeEpoch, "BEFORE_EPOCH"},
    {TrainingStage::BeforeBatch, "BEFORE_BATCH"},
    {TrainingStage::BeforeForward, "BEFORE_FORWARD"},
    {TrainingStage::AfterForward, "AFTER_FORWARD"},
    {TrainingStage::BeforeLoss, "BEFORE_LOSS"},
    {TrainingStage::AfterLoss, "AFTER_LOSS"},
    {TrainingStage::BeforeBackward, "BEFORE_BACKWARD"},
    {TrainingStage::DoBackward, "DO_BACKWARD"},
    {TrainingStage::AfterBackward, "AFTER_BACKWARD"},
    {TrainingStage::BeforeOptimizerStep, "BEFORE_OPTIMIZER_STEP"},
    {TrainingStage::DoOptimizerStep, "DO_OPTIMIZER_STEP"},
    {TrainingStage::AfterOptimizerStep, "AFTER_OPTIMIZER_STEP"},
    {TrainingStage::AfterBatch, "AFTER_BATCH"},
    {TrainingStage::AfterEpoch, "AFTER_EPOCH"},
    {TrainingStage::AfterTraining, "AFTER_TRAINING"},
    {TrainingStage::AfterValidation, "AFTER_VALIDATION"},
}};

}  // namespace

const std::array<TrainingStage, kTrainingStageCount>& all_training_stages() {
  static const std::array<TrainingStage, kTrainingStageCount> stages = [] {
    std::array<TrainingStage, kTrainingStageCount> result{};
    for (std::size_t i = 0; i < kNames.size(); ++i) result[i] = kNames[i].first;
    return result;
  }();
  return stages;
}

std::string to_string(TrainingStage stage) {
  const int index = static_cast<int>(stage) - 1;
  if (index < 0 || index >= kTrainingStageCount) {
    return "TrainingStage(" + std::to_string(static_cast<int>(stage)) + ")";
  }
  return std::string(kNames[static_cast<std::size_t>(index)].second);
}

std::ostream& operator<<(std::ostream& out, TrainingStage stage) { return out << to_string(stage); }

TrainingStage parse_training_stage(std::string_view name) {
  std::string accepted;
  for (const auto& [stage, spelling] : kNames) {
    if (name == spelling) return stage;
    accepted += (accepted.empty() ? "" : ", ") + std::string(spelling);
  }
  throw std::invalid_argument("unknown training stage '" + std::string(name) +
                              "' (expected one of: " + accepted + ")");
}

}  // namespace otf

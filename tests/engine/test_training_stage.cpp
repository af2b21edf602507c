// TrainingStage: the member order and values the reference snapshots, and the naming invariants
// of docs/design.md §3.1.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "training_stage.h"

namespace {

using otf::TrainingStage;

int value(TrainingStage stage) { return static_cast<int>(stage); }

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

TEST(TrainingStage, MembersInDeclarationOrderWithValuesOneToEighteen) {
  const std::vector<std::string> expected = {"SETUP",
                                             "BEFORE_TRAINING",
                                             "BEFORE_EPOCH",
                                             "BEFORE_BATCH",
                                             "BEFORE_FORWARD",
                                             "AFTER_FORWARD",
                                             "BEFORE_LOSS",
                                             "AFTER_LOSS",
                                             "BEFORE_BACKWARD",
                                             "DO_BACKWARD",
                                             "AFTER_BACKWARD",
                                             "BEFORE_OPTIMIZER_STEP",
                                             "DO_OPTIMIZER_STEP",
                                             "AFTER_OPTIMIZER_STEP",
                                             "AFTER_BATCH",
                                             "AFTER_EPOCH",
                                             "AFTER_TRAINING",
                                             "AFTER_VALIDATION"};
  const auto& stages = otf::all_training_stages();
  ASSERT_EQ(stages.size(), 18u);
  ASSERT_EQ(otf::kTrainingStageCount, 18);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    EXPECT_EQ(value(stages[i]), static_cast<int>(i) + 1);
    EXPECT_EQ(otf::to_string(stages[i]), expected[i]);
  }
  EXPECT_EQ(value(TrainingStage::Setup), 1);
  EXPECT_EQ(value(TrainingStage::AfterValidation), 18);
}

TEST(TrainingStage, EveryNameButSetupStartsWithBeforeAfterOrDo) {
  for (const TrainingStage stage : otf::all_training_stages()) {
    const std::string name = otf::to_string(stage);
    if (stage == TrainingStage::Setup) continue;
    EXPECT_TRUE(starts_with(name, "BEFORE_") || starts_with(name, "AFTER_") ||
                starts_with(name, "DO_"))
        << name;
  }
}

TEST(TrainingStage, EachDoStageSitsBetweenItsBeforeAndAfter) {
  int do_stages = 0;
  for (const TrainingStage stage : otf::all_training_stages()) {
    const std::string name = otf::to_string(stage);
    if (!starts_with(name, "DO_")) continue;
    ++do_stages;
    const std::string suffix = name.substr(3);
    const TrainingStage before = static_cast<TrainingStage>(value(stage) - 1);
    const TrainingStage after = static_cast<TrainingStage>(value(stage) + 1);
    EXPECT_EQ(otf::to_string(before), "BEFORE_" + suffix);
    EXPECT_EQ(otf::to_string(after), "AFTER_" + suffix);
  }
  EXPECT_EQ(do_stages, 2);
}

TEST(TrainingStage, OptimizerStepBoundaries) {
  EXPECT_EQ(value(TrainingStage::AfterBackward) + 1, value(TrainingStage::BeforeOptimizerStep));
  EXPECT_EQ(value(TrainingStage::AfterOptimizerStep) + 1, value(TrainingStage::AfterBatch));
}

TEST(TrainingStage, ParseIsTheInverseOfToString) {
  for (const TrainingStage stage : otf::all_training_stages()) {
    EXPECT_EQ(otf::parse_training_stage(otf::to_string(stage)), stage);
  }
  std::ostringstream out;
  out << TrainingStage::DoBackward;
  EXPECT_EQ(out.str(), "DO_BACKWARD");
}

TEST(TrainingStage, ParseRejectsUnknownNamesListingTheStages) {
  try {
    otf::parse_training_stage("before_batch");
    FAIL() << "lower case must be rejected";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'before_batch'"), std::string::npos) << message;
    EXPECT_NE(message.find("BEFORE_BATCH"), std::string::npos) << message;
    EXPECT_NE(message.find("AFTER_VALIDATION"), std::string::npos) << message;
  }
}

}  // namespace

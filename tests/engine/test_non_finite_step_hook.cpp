// NonFiniteStepHook: a step with a NaN/inf loss or gradient is vetoed in float32 (the weights keep
// their values and the strategy reports the step as not taken), finite steps go on, the counters
// say how many were vetoed and how many in a row, and an accumulation micro-batch is not judged.
#include <gtest/gtest.h>

#include <limits>

#include "non_finite_step_hook.h"
#include "training_strategy.h"
#include "training_test_support.h"

namespace otf::testing {
namespace {

TrainingBatch poisoned_batch(float value) {
  TrainingBatch batch = linear_batch(4, 3);
  torch::Tensor energy = batch.at("energy").clone();
  energy[0] = value;
  batch.set("energy", energy);
  return batch;
}

TEST(NonFiniteStepHook, VetoesNonFiniteStepsAndKeepsTheWeights) {
  auto guard = std::make_shared<NonFiniteStepHook>();
  auto model = linear_model({0.1f, 0.2f, 0.3f});
  TrainingStrategy strategy(linear_options({guard}, model));
  ASSERT_TRUE(strategy.train_batch(linear_batch(4, 1)));
  const torch::Tensor before = model->linear->weight.detach().clone();
  EXPECT_FALSE(strategy.train_batch(poisoned_batch(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_FALSE(strategy.train_batch(poisoned_batch(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(torch::equal(model->linear->weight.detach(), before));
  EXPECT_TRUE(model->linear->weight.detach().isfinite().all().item<bool>());
  EXPECT_EQ(guard->vetoed_steps(), 2);
  EXPECT_EQ(guard->consecutive_vetoes(), 2);
  EXPECT_EQ(strategy.counters().step_count, 1);
  // A finite batch steps again (the vetoed gradients were dropped by zero_grad) and resets the
  // run of vetoes.
  EXPECT_TRUE(strategy.train_batch(linear_batch(4, 2)));
  EXPECT_FALSE(torch::equal(model->linear->weight.detach(), before));
  EXPECT_EQ(guard->consecutive_vetoes(), 0);
  EXPECT_EQ(guard->vetoed_steps(), 2);
}

TEST(NonFiniteStepHook, WithoutItFloat32StepsOnNaN) {
  // The defect it guards against: the plain optimizer takes the NaN step.
  auto model = linear_model({0.1f, 0.2f, 0.3f});
  TrainingStrategy strategy(linear_options({}, model));
  EXPECT_TRUE(strategy.train_batch(poisoned_batch(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_FALSE(model->linear->weight.detach().isfinite().all().item<bool>());
}

TEST(NonFiniteStepHook, LeavesAccumulationMicroBatchesAlone) {
  auto guard = std::make_shared<NonFiniteStepHook>();
  TrainingStrategy strategy(linear_options({accumulation_hook(2), guard}));
  EXPECT_FALSE(strategy.train_batch(poisoned_batch(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(guard->vetoed_steps(), 0) << "a micro-batch that cannot step is not judged";
  // The group's last batch carries the NaN accumulated from the first: vetoed.
  EXPECT_FALSE(strategy.train_batch(linear_batch(4, 5)));
  EXPECT_EQ(guard->vetoed_steps(), 1);
}

TEST(NonFiniteStepHook, DeclaresItsBucketAndKey) {
  const NonFiniteStepHook guard;
  EXPECT_EQ(guard.priority(), 40);
  ASSERT_TRUE(guard.exclusive_key().has_value());
  EXPECT_EQ(*guard.exclusive_key(), "NonFiniteStepHook");
}

}  // namespace
}  // namespace otf::testing

// TrainingUpdateOrchestrator driven directly (no strategy): composition, priority order, veto
// composition, loss chaining, zero_grad/backward ownership and the optimizer-step cases A, B and C
// of docs/design.md §5.4 (modelled on the reference's test_training_update_orchestrator.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "grad_scaler.h"
#include "training_test_support.h"
#include "training_update_orchestrator.h"

namespace {

using otf::GradScaler;
using otf::TrainContext;
using otf::TrainingStage;
using otf::TrainingUpdateHook;
using otf::TrainingUpdateOrchestrator;
using otf::testing::CountingScheduler;
using otf::testing::error_message;
using otf::testing::ScriptedUpdateHook;

std::shared_ptr<ScriptedUpdateHook> hook(int priority, const std::string& label = "") {
  return std::make_shared<ScriptedUpdateHook>(priority, label);
}

std::vector<int> priorities(const TrainingUpdateOrchestrator& orchestrator) {
  std::vector<int> result;
  for (const auto& child : orchestrator.hooks()) result.push_back(child->priority());
  return result;
}

// One parameter w = 3 and loss = w * 1 -> d(loss)/dw = 1; a second optimizer over v = 5.
struct Fixture {
  torch::Tensor w = torch::full({1}, 3.0).requires_grad_(true);
  torch::Tensor v = torch::full({1}, 5.0).requires_grad_(true);
  torch::optim::SGD first{std::vector<torch::Tensor>{w}, torch::optim::SGDOptions(0.5)};
  torch::optim::SGD second{std::vector<torch::Tensor>{v}, torch::optim::SGDOptions(0.5)};
  TrainContext ctx;

  explicit Fixture(bool two_optimizers = false) {
    ctx.optimizers = {&first};
    if (two_optimizers) ctx.optimizers.push_back(&second);
  }
  // loss = 3w (value 9, gradient 3) [+ v].
  void make_loss() { ctx.loss = (w * 3.0).sum() + (v * 1.0).sum(); }
};

TEST(TrainingUpdateHook, DefaultPriorityIsFiftyAndDefaultCallPassesThrough) {
  TrainingUpdateHook plain;
  EXPECT_EQ(plain.priority(), 50);
  EXPECT_EQ(TrainingUpdateHook::kDefaultPriority, 50);
  EXPECT_FALSE(plain.exclusive_key().has_value());
  TrainContext ctx;
  ctx.loss = torch::tensor(1.5);
  const otf::UpdateResult result = plain.call(ctx, TrainingStage::DoOptimizerStep, false);
  EXPECT_TRUE(result.proceed);
  EXPECT_TRUE(result.loss.is_same(ctx.loss));
}

TEST(TrainingUpdateHook, HookAndOrchestratorClaimExactlyTheFourUpdateStages) {
  TrainingUpdateOrchestrator orchestrator;
  for (const TrainingStage stage : otf::all_training_stages()) {
    const bool update_stage =
        stage == TrainingStage::BeforeBatch || stage == TrainingStage::DoBackward ||
        stage == TrainingStage::DoOptimizerStep || stage == TrainingStage::AfterOptimizerStep;
    EXPECT_EQ(TrainingUpdateHook::runs_on_stage(stage), update_stage) << stage;
    EXPECT_EQ(orchestrator.runs_on_stage(stage), update_stage) << stage;
  }
  EXPECT_EQ(orchestrator.frequency(), 1);
}

TEST(TrainingUpdateOrchestratorAlgebra, HookPlusHookKeepsOrderAndIdentity) {
  const auto a = hook(50, "a");
  const auto b = hook(50, "b");
  const auto composed = a + b;
  ASSERT_EQ(composed->hooks().size(), 2u);
  EXPECT_EQ(composed->hooks()[0], a);
  EXPECT_EQ(composed->hooks()[1], b);
}

TEST(TrainingUpdateOrchestratorAlgebra, MixedSumsAreFlatAndSorted) {
  const auto a = hook(10, "a");
  const auto b = hook(30, "b");
  const auto c = hook(20, "c");
  const std::shared_ptr<TrainingUpdateOrchestrator> ab = a + b;
  EXPECT_EQ(priorities(*(ab + c)), (std::vector<int>{10, 20, 30}));
  EXPECT_EQ(priorities(*(c + ab)), (std::vector<int>{10, 20, 30}));
  const auto d = hook(40, "d");
  const std::shared_ptr<TrainingUpdateOrchestrator> cd = c + d;
  const auto all = ab + cd;
  EXPECT_EQ(priorities(*all), (std::vector<int>{10, 20, 30, 40}));
  EXPECT_EQ(all->hooks()[0], a);
  EXPECT_EQ(all->hooks()[3], d);
  // compose_update_hooks is the same operation as a free function.
  const auto composed = otf::compose_update_hooks({ab, c, d});
  EXPECT_EQ(priorities(*composed), (std::vector<int>{10, 20, 30, 40}));
}

TEST(TrainingUpdateOrchestrator, SortsByPriorityStablyAndCallsEveryHook) {
  std::vector<std::string> log;
  auto p30 = hook(30, "p30");
  auto p10 = hook(10, "p10");
  auto p20 = hook(20, "p20");
  auto tie_first = hook(20, "tie_first");
  auto tie_second = hook(20, "tie_second");
  for (auto* h : {p30.get(), p10.get(), p20.get(), tie_first.get(), tie_second.get()})
    h->log = &log;
  TrainingUpdateOrchestrator orchestrator({p30, p10, p20, tie_first, tie_second});
  EXPECT_EQ(priorities(orchestrator), (std::vector<int>{10, 20, 20, 20, 30}));
  Fixture fixture;
  orchestrator(fixture.ctx, TrainingStage::AfterOptimizerStep);
  EXPECT_EQ(log, (std::vector<std::string>{"p10:AFTER_OPTIMIZER_STEP", "p20:AFTER_OPTIMIZER_STEP",
                                           "tie_first:AFTER_OPTIMIZER_STEP",
                                           "tie_second:AFTER_OPTIMIZER_STEP",
                                           "p30:AFTER_OPTIMIZER_STEP"}));
}

TEST(TrainingUpdateOrchestrator, RejectsDuplicateExclusiveKeysNamingBothHooks) {
  auto first = std::make_shared<ScriptedUpdateHook>(30, "FirstClip", "Clip");
  auto second = std::make_shared<ScriptedUpdateHook>(30, "SecondClip", "Clip");
  EXPECT_EQ(error_message([&] {
              TrainingUpdateOrchestrator({first, second});
            }),
            "Only one update hook with exclusive key 'Clip' may be registered; got FirstClip and "
            "SecondClip.");
  EXPECT_EQ(error_message([&] { (void)(first + second); }),
            "Only one update hook with exclusive key 'Clip' may be registered; got FirstClip and "
            "SecondClip.");
}

TEST(TrainingUpdateOrchestrator, RejectsNullHooksAndTheSameInstanceTwice) {
  const auto a = hook(10, "a");
  EXPECT_NE(error_message([&] {
              TrainingUpdateOrchestrator({a, nullptr});
            }).find("null"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              TrainingUpdateOrchestrator({a, a});
            }).find("duplicate hook instances"),
            std::string::npos);
  EXPECT_NO_THROW(TrainingUpdateOrchestrator());
}

TEST(TrainingUpdateOrchestrator, BeforeBatchZeroesGradientsToNoneUnlessVetoed) {
  Fixture fixture;
  fixture.make_loss();
  fixture.ctx.loss.backward();
  ASSERT_TRUE(fixture.w.grad().defined());

  auto vetoing = hook(10, "veto");
  vetoing->veto = [](TrainingStage stage, int64_t) { return stage == TrainingStage::BeforeBatch; };
  TrainingUpdateOrchestrator vetoed({vetoing});
  vetoed(fixture.ctx, TrainingStage::BeforeBatch);
  ASSERT_TRUE(fixture.w.grad().defined()) << "a veto keeps gradients for accumulation";
  EXPECT_EQ(fixture.w.grad().item<double>(), 3.0);

  TrainingUpdateOrchestrator proceeding({hook(10)});
  proceeding(fixture.ctx, TrainingStage::BeforeBatch);
  EXPECT_FALSE(fixture.w.grad().defined()) << "zero_grad(set_to_none=True)";
}

TEST(TrainingUpdateOrchestrator, VetoesComposeWithoutShortCircuit) {
  auto first = hook(10, "first");
  auto vetoing = hook(20, "vetoing");
  vetoing->veto = [](TrainingStage, int64_t) { return true; };
  auto last = hook(30, "last");
  TrainingUpdateOrchestrator orchestrator({last, vetoing, first});
  Fixture fixture;
  fixture.make_loss();
  fixture.ctx.loss.backward();
  orchestrator(fixture.ctx, TrainingStage::BeforeBatch);
  // Every hook ran; the ones up to and including the vetoer saw will_skip=false.
  EXPECT_EQ(first->will_skip_at(TrainingStage::BeforeBatch), std::vector<bool>{false});
  EXPECT_EQ(vetoing->will_skip_at(TrainingStage::BeforeBatch), std::vector<bool>{false});
  EXPECT_EQ(last->will_skip_at(TrainingStage::BeforeBatch), std::vector<bool>{true});
  EXPECT_TRUE(fixture.w.grad().defined()) << "zero_grad must not run after a veto";

  const double w_before = fixture.w.item<double>();
  orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
  EXPECT_EQ(last->will_skip_at(TrainingStage::DoOptimizerStep), std::vector<bool>{true});
  EXPECT_EQ(fixture.w.item<double>(), w_before);
  EXPECT_TRUE(orchestrator.optimizer_step_skipped());
  EXPECT_TRUE(fixture.ctx.optimizer_step_vetoed);
  orchestrator(fixture.ctx, TrainingStage::AfterOptimizerStep);
  EXPECT_EQ(first->will_skip_at(TrainingStage::AfterOptimizerStep), std::vector<bool>{true});
}

TEST(TrainingUpdateOrchestrator, OneFalseAmongFiveWinsAndAllTrueRuns) {
  std::vector<std::shared_ptr<ScriptedUpdateHook>> hooks;
  for (int i = 0; i < 5; ++i) hooks.push_back(hook(10 * (i + 1)));
  hooks[3]->veto = [](TrainingStage stage, int64_t) {
    return stage == TrainingStage::DoOptimizerStep;
  };
  TrainingUpdateOrchestrator orchestrator({hooks.begin(), hooks.end()});
  Fixture fixture;
  fixture.make_loss();
  fixture.ctx.loss.backward();
  orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
  EXPECT_TRUE(orchestrator.optimizer_step_skipped());
  EXPECT_EQ(fixture.w.item<double>(), 3.0);

  hooks[3]->veto = nullptr;
  orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
  EXPECT_FALSE(orchestrator.optimizer_step_skipped());
  EXPECT_FALSE(fixture.ctx.optimizer_step_vetoed);
  EXPECT_DOUBLE_EQ(fixture.w.item<double>(), 3.0 - 0.5 * 3.0);
}

TEST(TrainingUpdateOrchestrator, LossChainComposesMultiplicativelyAndBackwardRunsOnce) {
  auto half = hook(10, "half");
  half->loss_factor = 0.5;
  auto passthrough = hook(15, "passthrough");
  auto four = hook(20, "four");
  four->loss_factor = 4.0;
  std::vector<double> loss_seen_by_passthrough;
  passthrough->on_call = [&](TrainContext& ctx, TrainingStage stage, bool) {
    if (stage == TrainingStage::DoBackward)
      loss_seen_by_passthrough.push_back(ctx.loss.item<double>());
  };
  TrainingUpdateOrchestrator orchestrator({four, passthrough, half});
  Fixture fixture;
  fixture.ctx.loss = (fixture.w * 1.0).sum();  // value 3, gradient 1
  orchestrator(fixture.ctx, TrainingStage::DoBackward);
  EXPECT_EQ(loss_seen_by_passthrough, std::vector<double>{1.5});
  EXPECT_DOUBLE_EQ(fixture.ctx.loss.item<double>(), 6.0);  // 3 * 0.5 * 4
  EXPECT_DOUBLE_EQ(fixture.w.grad().item<double>(), 2.0);  // gradient x2, accumulated once
}

TEST(TrainingUpdateOrchestrator, LossFactorTwoDoublesTheGradient) {
  auto twice = hook(10);
  twice->loss_factor = 2.0;
  TrainingUpdateOrchestrator orchestrator({twice});
  Fixture fixture;
  fixture.make_loss();  // gradient 3 for w
  orchestrator(fixture.ctx, TrainingStage::DoBackward);
  EXPECT_DOUBLE_EQ(fixture.w.grad().item<double>(), 6.0);
}

TEST(TrainingUpdateOrchestrator, UndefinedLossFromAHookIsRejectedBeforeBackward) {
  auto broken = hook(10, "BrokenLossHook");
  broken->return_undefined_loss = true;
  TrainingUpdateOrchestrator orchestrator({broken});
  Fixture fixture;
  fixture.make_loss();
  const std::string message =
      error_message([&] { orchestrator(fixture.ctx, TrainingStage::DoBackward); });
  EXPECT_NE(message.find("BrokenLossHook"), std::string::npos) << message;
  EXPECT_NE(message.find("DO_BACKWARD"), std::string::npos) << message;
  EXPECT_FALSE(fixture.w.grad().defined()) << "no backward after the error";

  TrainingUpdateOrchestrator empty;
  Fixture no_loss;
  EXPECT_NE(
      error_message([&] { empty(no_loss.ctx, TrainingStage::DoBackward); }).find("DO_BACKWARD"),
      std::string::npos);
}

TEST(TrainingUpdateOrchestrator, NonUpdateStagesCallNoChild) {
  auto child = hook(10);
  TrainingUpdateOrchestrator orchestrator({child});
  Fixture fixture;
  for (const TrainingStage stage :
       {TrainingStage::BeforeForward, TrainingStage::BeforeBackward, TrainingStage::AfterBatch}) {
    orchestrator(fixture.ctx, stage);
  }
  EXPECT_TRUE(child->calls.empty());
  orchestrator(fixture.ctx, TrainingStage::Setup);
  ASSERT_EQ(child->calls.size(), 1u);
  EXPECT_EQ(child->calls[0].stage, TrainingStage::Setup);
  EXPECT_FALSE(child->calls[0].will_skip);
}

TEST(TrainingUpdateOrchestrator, CaseAStepsOptimizersAndTimeBasedSchedulersOnly) {
  TrainingUpdateOrchestrator orchestrator({hook(10)});
  Fixture fixture(/*two_optimizers=*/true);
  CountingScheduler time_based;
  CountingScheduler metric_driven(/*metric_driven=*/true);
  fixture.ctx.lr_schedulers = {&time_based, &metric_driven};
  fixture.make_loss();
  fixture.ctx.loss.backward();
  orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
  EXPECT_FALSE(orchestrator.optimizer_step_skipped());
  EXPECT_DOUBLE_EQ(fixture.w.item<double>(), 1.5);
  EXPECT_DOUBLE_EQ(fixture.v.item<double>(), 4.5);
  EXPECT_EQ(time_based.steps, 1);
  EXPECT_EQ(metric_driven.steps, 0) << "metric-driven schedules step only after validation";

  auto observer = hook(50);
  TrainingUpdateOrchestrator observed({observer});
  observed(fixture.ctx, TrainingStage::DoOptimizerStep);
  observed(fixture.ctx, TrainingStage::AfterOptimizerStep);
  EXPECT_EQ(observer->will_skip_at(TrainingStage::AfterOptimizerStep), std::vector<bool>{false});
}

TEST(TrainingUpdateOrchestrator, AVetoSuppressesOptimizerAndSchedulerSteps) {
  auto vetoing = hook(20);
  vetoing->veto = [](TrainingStage, int64_t) { return true; };
  TrainingUpdateOrchestrator orchestrator({vetoing});
  Fixture fixture;
  CountingScheduler scheduler;
  fixture.ctx.lr_schedulers = {&scheduler};
  fixture.make_loss();
  fixture.ctx.loss.backward();
  orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
  EXPECT_EQ(fixture.w.item<double>(), 3.0);
  EXPECT_EQ(scheduler.steps, 0);
  EXPECT_TRUE(orchestrator.optimizer_step_skipped());
}

// A GradScaler whose scale exists (scale() was called) with scaled gradients in place.
void scaled_backward(Fixture& fixture, GradScaler& scaler) {
  fixture.make_loss();
  scaler.scale(fixture.ctx.loss).backward();
  fixture.ctx.grad_scaler = &scaler;
}

otf::GradScalerOptions scaler_options(double init_scale) {
  otf::GradScalerOptions options;
  options.init_scale = init_scale;
  return options;
}

TEST(TrainingUpdateOrchestrator, CaseBFastPathStepsThroughTheScalerAndDetectsSkipsByScale) {
  TrainingUpdateOrchestrator orchestrator;
  {
    Fixture fixture;
    GradScaler scaler(scaler_options(128.0));
    scaled_backward(fixture, scaler);
    orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
    EXPECT_FALSE(orchestrator.optimizer_step_skipped());
    EXPECT_DOUBLE_EQ(fixture.w.item<double>(), 1.5) << "stepped on the unscaled gradient 3";
    EXPECT_EQ(scaler.get_scale(), 128.0);
    EXPECT_EQ(scaler.get_growth_tracker(), 1) << "update() ran once";
  }
  {
    Fixture fixture;
    GradScaler scaler(scaler_options(128.0));
    scaled_backward(fixture, scaler);
    fixture.w.mutable_grad().fill_(std::numeric_limits<float>::infinity());
    orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
    EXPECT_TRUE(orchestrator.optimizer_step_skipped()) << "128 -> 64 means a skip";
    EXPECT_EQ(fixture.w.item<double>(), 3.0);
    EXPECT_EQ(scaler.get_scale(), 64.0);
  }
}

TEST(TrainingUpdateOrchestrator, CaseCStepsEachSchedulerOnlyIfItsOptimizerStepped) {
  TrainingUpdateOrchestrator orchestrator;
  {
    Fixture fixture(/*two_optimizers=*/true);
    CountingScheduler first_scheduler;
    CountingScheduler second_scheduler;
    fixture.ctx.lr_schedulers = {&first_scheduler, &second_scheduler};
    GradScaler scaler(scaler_options(128.0));
    scaled_backward(fixture, scaler);
    orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
    EXPECT_FALSE(orchestrator.optimizer_step_skipped());
    EXPECT_EQ(first_scheduler.steps, 1);
    EXPECT_EQ(second_scheduler.steps, 1);
  }
  {
    Fixture fixture(/*two_optimizers=*/true);
    CountingScheduler first_scheduler;
    CountingScheduler second_scheduler;
    fixture.ctx.lr_schedulers = {&first_scheduler, &second_scheduler};
    GradScaler scaler(scaler_options(128.0));
    scaled_backward(fixture, scaler);
    fixture.v.mutable_grad().fill_(std::numeric_limits<float>::quiet_NaN());
    orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
    // The first optimizer and its schedule stepped; the second did not; the batch is "skipped".
    EXPECT_TRUE(orchestrator.optimizer_step_skipped());
    EXPECT_DOUBLE_EQ(fixture.w.item<double>(), 1.5);
    EXPECT_EQ(fixture.v.item<double>(), 5.0);
    EXPECT_EQ(first_scheduler.steps, 1);
    EXPECT_EQ(second_scheduler.steps, 0);
    EXPECT_EQ(scaler.get_scale(), 64.0);
  }
}

TEST(TrainingUpdateOrchestrator, MoreSchedulersThanOptimizersIsAnError) {
  TrainingUpdateOrchestrator orchestrator;
  Fixture fixture;
  CountingScheduler a;
  CountingScheduler b;
  fixture.ctx.lr_schedulers = {&a, &b};
  fixture.make_loss();
  fixture.ctx.loss.backward();
  EXPECT_NE(error_message([&] {
              orchestrator(fixture.ctx, TrainingStage::DoOptimizerStep);
            }).find("aligned"),
            std::string::npos);
}

TEST(TrainingUpdateOrchestrator, ForwardsLifecycleInPriorityOrderAndExitsInReverse) {
  std::vector<std::string> log;
  auto second = hook(20, "second");
  auto first = hook(10, "first");
  first->log = &log;
  second->log = &log;
  TrainingUpdateOrchestrator orchestrator({second, first});
  orchestrator.enter();
  log.push_back("inside");
  orchestrator.exit();
  EXPECT_EQ(log, (std::vector<std::string>{"enter:first", "enter:second", "inside", "exit:second",
                                           "exit:first"}));
}

}  // namespace

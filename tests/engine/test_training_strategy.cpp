// TrainingStrategy: stage order, counters, folding of update hooks and every registration rule,
// lifecycle, train_batch, validation and data parallelism (docs/design.md §2-§4 and §6;
// modelled on the reference's test_strategy.py / test_stages.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "communicator.h"
#include "training_test_support.h"
#include "training_update_orchestrator.h"

namespace {

using otf::CallbackHook;
using otf::Hook;
using otf::HookEntry;
using otf::TrainContext;
using otf::TrainingBatch;
using otf::TrainingCounters;
using otf::TrainingStage;
using otf::TrainingStrategy;
using otf::TrainingStrategyOptions;
using otf::TrainingUpdateOrchestrator;
using otf::testing::accumulation_hook;
using otf::testing::CountingScheduler;
using otf::testing::error_message;
using otf::testing::IdenticalRanksCommunicator;
using otf::testing::linear_batches;
using otf::testing::linear_options;
using otf::testing::ScriptedUpdateHook;
using otf::testing::StageRecorder;

using Stages = std::vector<TrainingStage>;

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// A plain hook on one stage that logs its lifecycle.
class LifecycleHook final : public Hook {
 public:
  LifecycleHook(std::string label, std::vector<std::string>& log,
                TrainingStage stage = TrainingStage::AfterBatch)
      : Hook(stage), label_(std::move(label)), log_(log) {}
  void operator()(TrainContext&, TrainingStage) override {}
  void enter() override { log_.push_back("enter:" + label_); }
  void exit() override { log_.push_back("exit:" + label_); }
  std::string name() const override { return label_; }

 private:
  std::string label_;
  std::vector<std::string>& log_;
};

std::shared_ptr<Hook> noop_hook(TrainingStage stage) {
  return std::make_shared<CallbackHook>(stage, [](TrainContext&, TrainingStage) {});
}

// ---- Stage order -------------------------------------------------------------------------------

TEST(TrainingStrategyStages, OneBatchWithoutClaimantsFiresTheReferenceOrder) {
  auto recorder = std::make_shared<StageRecorder>();
  TrainingStrategy strategy(linear_options({recorder}));
  strategy.run(linear_batches(1));
  const Stages expected = {TrainingStage::Setup,
                           TrainingStage::BeforeTraining,
                           TrainingStage::BeforeEpoch,
                           TrainingStage::BeforeBatch,
                           TrainingStage::BeforeForward,
                           TrainingStage::AfterForward,
                           TrainingStage::BeforeLoss,
                           TrainingStage::AfterLoss,
                           TrainingStage::BeforeBackward,
                           TrainingStage::AfterBackward,
                           TrainingStage::BeforeOptimizerStep,
                           TrainingStage::AfterOptimizerStep,
                           TrainingStage::AfterBatch,
                           TrainingStage::AfterEpoch,
                           TrainingStage::AfterTraining};
  EXPECT_EQ(recorder->stages, expected);
  EXPECT_EQ(strategy.counters().step_count, 1);
}

TEST(TrainingStrategyStages, UpdateHooksRunInsideTheDoSlotsBetweenBeforeAndAfter) {
  std::vector<std::string> log;
  auto recorder = std::make_shared<StageRecorder>(
      [&log](TrainContext&, TrainingStage stage) { log.push_back("plain:" + to_string(stage)); });
  auto update = std::make_shared<ScriptedUpdateHook>(50, "update");
  update->log = &log;
  TrainingStrategy strategy(linear_options({recorder, update}));
  strategy.run(linear_batches(1));
  const std::vector<std::string> expected = {"enter:update",
                                             "plain:SETUP",
                                             "update:SETUP",
                                             "plain:BEFORE_TRAINING",
                                             "plain:BEFORE_EPOCH",
                                             "plain:BEFORE_BATCH",
                                             "update:BEFORE_BATCH",
                                             "plain:BEFORE_FORWARD",
                                             "plain:AFTER_FORWARD",
                                             "plain:BEFORE_LOSS",
                                             "plain:AFTER_LOSS",
                                             "plain:BEFORE_BACKWARD",
                                             "update:DO_BACKWARD",
                                             "plain:AFTER_BACKWARD",
                                             "plain:BEFORE_OPTIMIZER_STEP",
                                             "update:DO_OPTIMIZER_STEP",
                                             "plain:AFTER_OPTIMIZER_STEP",
                                             "update:AFTER_OPTIMIZER_STEP",
                                             "plain:AFTER_BATCH",
                                             "plain:AFTER_EPOCH",
                                             "plain:AFTER_TRAINING",
                                             "exit:update"};
  EXPECT_EQ(log, expected);
}

TEST(TrainingStrategyStages, LossIsLiveUntilBackwardThenDetached) {
  struct Snapshot {
    TrainingStage stage;
    bool loss_set, losses_set, has_grad_fn;
  };
  std::vector<Snapshot> snapshots;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    snapshots.push_back({stage, ctx.loss.defined(), ctx.losses.has_value(),
                         ctx.loss.defined() && ctx.loss.grad_fn() != nullptr});
  });
  TrainingStrategy strategy(linear_options({recorder}));
  strategy.run(linear_batches(1));
  auto at = [&](TrainingStage stage) {
    for (const auto& s : snapshots) {
      if (s.stage == stage) return s;
    }
    ADD_FAILURE() << "stage not seen: " << stage;
    return Snapshot{stage, false, false, false};
  };
  for (TrainingStage stage : {TrainingStage::BeforeLoss}) {
    EXPECT_FALSE(at(stage).loss_set);
    EXPECT_FALSE(at(stage).losses_set);
  }
  for (TrainingStage stage : {TrainingStage::AfterLoss, TrainingStage::BeforeBackward}) {
    EXPECT_TRUE(at(stage).loss_set) << stage;
    EXPECT_TRUE(at(stage).losses_set) << stage;
    EXPECT_TRUE(at(stage).has_grad_fn) << stage;
  }
  for (TrainingStage stage : {TrainingStage::AfterBackward, TrainingStage::BeforeOptimizerStep,
                              TrainingStage::AfterBatch}) {
    EXPECT_TRUE(at(stage).loss_set) << stage;
    EXPECT_TRUE(at(stage).losses_set) << stage;
    EXPECT_FALSE(at(stage).has_grad_fn) << stage;
  }
  EXPECT_FALSE(at(TrainingStage::AfterTraining).loss_set);
}

TEST(TrainingStrategyStages, OneContextIsSharedByEveryStageOfABatch) {
  std::vector<const TrainContext*> seen;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    if (stage >= TrainingStage::BeforeBatch && stage <= TrainingStage::AfterBatch) {
      seen.push_back(&ctx);
    }
  });
  TrainingStrategy strategy(linear_options({recorder}));
  strategy.run(linear_batches(1));
  ASSERT_EQ(seen.size(), 10u);
  for (const TrainContext* ctx : seen) EXPECT_EQ(ctx, seen.front());
}

TEST(TrainingStrategyStages, OptimizersAreEmptyAtTheFirstSetupAndBuiltAtBeforeTraining) {
  std::vector<std::size_t> optimizer_counts;
  std::vector<bool> batch_present;
  auto hook = std::make_shared<CallbackHook>(
      std::set<TrainingStage>{TrainingStage::Setup, TrainingStage::BeforeTraining},
      [&](TrainContext& ctx, TrainingStage) {
        optimizer_counts.push_back(ctx.optimizers.size());
        batch_present.push_back(ctx.batch != nullptr);
      });
  TrainingStrategy strategy(linear_options({hook}));
  strategy.run(linear_batches(1));
  EXPECT_EQ(optimizer_counts, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(batch_present, (std::vector<bool>{false, true}));
}

// ---- Counters ----------------------------------------------------------------------------------

TEST(TrainingStrategyCounters, EveryOtherVetoWithHalfEpochModifier) {
  // 4 batches, num_epochs=1, epoch_step_modifier=0.5 -> target 2 executed steps.
  auto accumulate = accumulation_hook(2);
  std::vector<int64_t> step_counts_at_step;
  accumulate->on_call = [&](TrainContext& ctx, TrainingStage stage, bool) {
    if (stage == TrainingStage::DoOptimizerStep) {
      step_counts_at_step.push_back(ctx.counters.step_count);
    }
  };
  TrainingStrategyOptions options = linear_options({accumulate});
  options.epoch_step_modifier = 0.5;
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(4));
  EXPECT_EQ(strategy.counters().step_count, 2);
  EXPECT_EQ(strategy.counters().batch_count, 4);
  EXPECT_EQ(strategy.counters().epoch, 1);
  EXPECT_EQ(strategy.counters().epoch_step_count, 0);
  EXPECT_EQ(step_counts_at_step, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(accumulate->will_skip_at(TrainingStage::AfterOptimizerStep),
            (std::vector<bool>{true, false, true, false}));
}

TEST(TrainingStrategyCounters, TwoEpochsOfThreeBatches) {
  std::vector<int64_t> step_counts_at_loss;
  int before_epoch = 0;
  int after_epoch = 0;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    if (stage == TrainingStage::AfterLoss) step_counts_at_loss.push_back(ctx.counters.step_count);
    before_epoch += stage == TrainingStage::BeforeEpoch ? 1 : 0;
    after_epoch += stage == TrainingStage::AfterEpoch ? 1 : 0;
  });
  TrainingStrategyOptions options = linear_options({recorder});
  options.num_epochs = 2;
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(3));
  const TrainingCounters expected{6, 6, 6, 0, 2};
  EXPECT_EQ(strategy.counters(), expected);
  EXPECT_EQ(step_counts_at_loss, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(before_epoch, 2);
  EXPECT_EQ(after_epoch, 2);
}

TEST(TrainingStrategyCounters, NumStepsCyclesThroughTheBatches) {
  TrainingStrategyOptions options = linear_options();
  options.num_epochs.reset();
  options.num_steps = 5;
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(2));
  const TrainingCounters expected{5, 5, 5, 1, 2};
  EXPECT_EQ(strategy.counters(), expected);
}

TEST(TrainingStrategyCounters, EpochStepModifierHalvesTheTarget) {
  TrainingStrategyOptions options = linear_options();
  options.num_epochs = 2;
  options.epoch_step_modifier = 0.5;
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(3));
  EXPECT_EQ(strategy.counters().step_count, 3);
}

TEST(TrainingStrategyCounters, ASecondRunWithTheSameTargetIsANoOp) {
  auto recorder = std::make_shared<StageRecorder>();
  TrainingStrategy strategy(linear_options({recorder}));
  strategy.run(linear_batches(2));
  const TrainingCounters after_first = strategy.counters();
  const auto weights = otf::testing::clones(strategy.models().at("main")->parameters());
  recorder->stages.clear();
  strategy.run(linear_batches(2));
  EXPECT_EQ(strategy.counters(), after_first);
  EXPECT_EQ(recorder->stages, Stages{TrainingStage::Setup});
  EXPECT_TRUE(otf::testing::bitwise_equal(
      weights, otf::testing::clones(strategy.models().at("main")->parameters())));
}

TEST(TrainingStrategyCounters, ResumesMidEpochFromRestoredCounters) {
  std::vector<int64_t> batches_seen;
  int before_epoch = 0;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    if (stage == TrainingStage::BeforeBatch)
      batches_seen.push_back(ctx.batch->at("index").item<int64_t>());
    before_epoch += stage == TrainingStage::BeforeEpoch ? 1 : 0;
  });
  TrainingStrategyOptions options = linear_options({recorder});
  options.num_epochs = 3;
  TrainingStrategy strategy(std::move(options));
  strategy.set_counters({/*step*/ 4, /*global*/ 4, /*batch*/ 4, /*epoch_step*/ 1, /*epoch*/ 1});
  auto batches = linear_batches(3);
  for (int64_t i = 0; i < 3; ++i)
    batches[static_cast<std::size_t>(i)].set("index", torch::tensor(i));
  strategy.run(batches);
  // Epoch 1 resumes at its second batch without BEFORE_EPOCH; epoch 2 runs whole; target 9.
  EXPECT_EQ(batches_seen, (std::vector<int64_t>{1, 2, 0, 1, 2}));
  EXPECT_EQ(before_epoch, 1);
  const TrainingCounters expected{9, 9, 9, 0, 3};
  EXPECT_EQ(strategy.counters(), expected);
}

TEST(TrainingStrategyCounters, InconsistentRestartCountersAreRejected) {
  TrainingStrategy strategy(linear_options());
  strategy.set_counters({0, 0, 0, 5, 0});
  EXPECT_TRUE(contains(error_message([&] { strategy.run(linear_batches(3)); }),
                       "restart counters are inconsistent"));
  EXPECT_FALSE(strategy.is_entered()) << "the lifecycle is left on errors";
  EXPECT_THROW(strategy.set_counters({-1, 0, 0, 0, 0}), std::invalid_argument);
}

TEST(TrainingStrategyCounters, FrequencyGatesOnTheStepCounter) {
  std::vector<int64_t> fired_at;
  auto every_other = std::make_shared<CallbackHook>(
      TrainingStage::AfterLoss,
      [&](TrainContext& ctx, TrainingStage) { fired_at.push_back(ctx.counters.step_count); },
      /*frequency=*/2);
  TrainingStrategy strategy(linear_options({every_other}));
  strategy.run(linear_batches(5));
  EXPECT_EQ(fired_at, (std::vector<int64_t>{0, 2, 4}));
}

// ---- Folding and registration rules ------------------------------------------------------------

TEST(TrainingStrategyHooks, UpdateHooksFoldIntoOneOrchestratorAtTheFirstPosition) {
  auto a = noop_hook(TrainingStage::AfterBatch);
  auto b = noop_hook(TrainingStage::AfterBatch);
  auto u1 = std::make_shared<ScriptedUpdateHook>(50, "u1");
  auto u2 = std::make_shared<ScriptedUpdateHook>(50, "u2");
  TrainingStrategy strategy(linear_options({a, u1, b, u2}));
  const auto& hooks = strategy.hooks();
  ASSERT_EQ(hooks.size(), 3u);
  EXPECT_EQ(hooks[0], a);
  EXPECT_EQ(hooks[2], b);
  auto* orchestrator = dynamic_cast<TrainingUpdateOrchestrator*>(hooks[1].get());
  ASSERT_NE(orchestrator, nullptr);
  EXPECT_EQ(strategy.update_orchestrator(), orchestrator);
  ASSERT_EQ(orchestrator->hooks().size(), 2u);
  EXPECT_EQ(orchestrator->hooks()[0], u1);
  EXPECT_EQ(orchestrator->hooks()[1], u2);
}

TEST(TrainingStrategyHooks, FoldingKeepsALoneExplicitOrchestratorAndMergesBareHooks) {
  auto u1 = std::make_shared<ScriptedUpdateHook>(30, "u1");
  auto u2 = std::make_shared<ScriptedUpdateHook>(10, "u2");
  const std::shared_ptr<TrainingUpdateOrchestrator> explicit_orchestrator = u1 + u2;
  {
    TrainingStrategy strategy(linear_options({explicit_orchestrator}));
    EXPECT_EQ(strategy.hooks().front(), explicit_orchestrator) << "identity preserved";
  }
  auto u3 = std::make_shared<ScriptedUpdateHook>(20, "u3");
  TrainingStrategy merged(linear_options({explicit_orchestrator, u3}));
  ASSERT_EQ(merged.hooks().size(), 1u);
  const auto& children = merged.update_orchestrator()->hooks();
  ASSERT_EQ(children.size(), 3u);
  EXPECT_EQ(children[0], u2);
  EXPECT_EQ(children[1], u3);
  EXPECT_EQ(children[2], u1);
  // No update hook, no orchestrator.
  TrainingStrategy plain(linear_options({noop_hook(TrainingStage::BeforeBatch)}));
  EXPECT_EQ(plain.update_orchestrator(), nullptr);
}

TEST(TrainingStrategyHooks, RegisterHookCreatesThenMergesTheOrchestrator) {
  TrainingStrategy strategy(linear_options());
  auto plain = noop_hook(TrainingStage::AfterBatch);
  strategy.register_hook(plain);
  EXPECT_EQ(strategy.update_orchestrator(), nullptr) << "a plain hook is not wrapped";
  auto u1 = std::make_shared<ScriptedUpdateHook>(40, "u1");
  strategy.register_hook(u1);
  ASSERT_NE(strategy.update_orchestrator(), nullptr);
  auto u2 = std::make_shared<ScriptedUpdateHook>(10, "u2");
  strategy.register_hook(u2);
  ASSERT_EQ(strategy.hooks().size(), 2u);
  EXPECT_EQ(strategy.update_orchestrator()->hooks(),
            (std::vector<std::shared_ptr<otf::TrainingUpdateHook>>{u2, u1}));
  // A stage given at registration assigns it.
  auto staged = std::make_shared<CallbackHook>(std::set<TrainingStage>{},
                                               [](TrainContext&, TrainingStage) {});
  strategy.register_hook(staged, TrainingStage::AfterTraining);
  EXPECT_EQ(staged->stages(), std::set<TrainingStage>{TrainingStage::AfterTraining});
}

TEST(TrainingStrategyHooks, TwoOrchestratorsAreRejected) {
  const std::shared_ptr<TrainingUpdateOrchestrator> first =
      std::make_shared<TrainingUpdateOrchestrator>();
  const std::shared_ptr<TrainingUpdateOrchestrator> second =
      std::make_shared<TrainingUpdateOrchestrator>();
  const std::string message = error_message([&] {
    TrainingStrategy strategy(linear_options({first, second}));
  });
  EXPECT_TRUE(contains(message, "Only one TrainingUpdateOrchestrator is allowed")) << message;
  EXPECT_TRUE(contains(message, "`+`")) << message;

  TrainingStrategy strategy(linear_options({first}));
  EXPECT_TRUE(contains(error_message([&] { strategy.register_hook(second); }),
                       "Only one TrainingUpdateOrchestrator"));
  EXPECT_EQ(strategy.hooks().size(), 1u);
  EXPECT_EQ(strategy.hooks().front(), first);
}

TEST(TrainingStrategyHooks, TwoClaimantsOfADoStageAreRejected) {
  auto backward_a = noop_hook(TrainingStage::DoBackward);
  auto backward_b = noop_hook(TrainingStage::DoBackward);
  std::string message = error_message([&] {
    TrainingStrategy strategy(linear_options({backward_a, backward_b}));
  });
  EXPECT_TRUE(contains(message,
                       "At most one hook may claim DO_BACKWARD; got 2: CallbackHook, "
                       "CallbackHook."))
      << message;

  auto update = std::make_shared<ScriptedUpdateHook>();
  auto step_owner = noop_hook(TrainingStage::DoOptimizerStep);
  message = error_message([&] { TrainingStrategy strategy(linear_options({update, step_owner})); });
  EXPECT_TRUE(contains(message, "At most one hook may claim DO_OPTIMIZER_STEP")) << message;
  EXPECT_TRUE(contains(message, "TrainingUpdateOrchestrator")) << message;
}

TEST(TrainingStrategyHooks, RegisterHookRollsBackOnRejection) {
  auto update = std::make_shared<ScriptedUpdateHook>();
  TrainingStrategy strategy(linear_options({update}));
  const auto before = strategy.hooks();
  auto hook = std::make_shared<CallbackHook>(TrainingStage::AfterBatch,
                                             [](TrainContext&, TrainingStage) {});
  const std::string message =
      error_message([&] { strategy.register_hook(hook, TrainingStage::DoBackward); });
  EXPECT_TRUE(contains(message, "DO_BACKWARD")) << message;
  EXPECT_EQ(strategy.hooks(), before);
  EXPECT_EQ(hook->stages(), std::set<TrainingStage>{TrainingStage::AfterBatch})
      << "the hook gets its stage back";
}

TEST(TrainingStrategyHooks, DuplicateInstancesAreRejected) {
  auto hook = noop_hook(TrainingStage::AfterBatch);
  EXPECT_TRUE(contains(error_message([&] {
                         TrainingStrategy s(linear_options({hook, hook}));
                       }),
                       "duplicate hook instances"));
  TrainingStrategy strategy(linear_options({hook}));
  EXPECT_TRUE(
      contains(error_message([&] { strategy.register_hook(hook); }), "duplicate hook instances"));
  EXPECT_EQ(strategy.hooks().size(), 1u);
  auto update = std::make_shared<ScriptedUpdateHook>();
  EXPECT_TRUE(contains(error_message([&] {
                         TrainingStrategy s(linear_options({update, update}));
                       }),
                       "duplicate hook instances"));
}

TEST(TrainingStrategyHooks, NonPositiveFrequenciesAreRejected) {
  auto hook = std::make_shared<CallbackHook>(
      TrainingStage::AfterBatch, [](TrainContext&, TrainingStage) {}, 0);
  EXPECT_TRUE(contains(error_message([&] { TrainingStrategy s(linear_options({hook})); }),
                       "Hook frequency must be a positive integer, got 0"));
  auto orchestrator = std::make_shared<TrainingUpdateOrchestrator>();
  orchestrator->set_frequency(-1);
  EXPECT_TRUE(contains(error_message([&] { TrainingStrategy s(linear_options({orchestrator})); }),
                       "Hook frequency must be a positive integer, got -1"));
}

TEST(TrainingStrategyHooks, StageArgumentIsRejectedForUpdateHooks) {
  TrainingStrategy strategy(linear_options());
  auto update = std::make_shared<ScriptedUpdateHook>(50, "Accumulate");
  const std::string message =
      error_message([&] { strategy.register_hook(update, TrainingStage::BeforeBatch); });
  EXPECT_TRUE(contains(message, "stage= is not supported for TrainingUpdateHook Accumulate"))
      << message;
  EXPECT_TRUE(contains(error_message([&] {
                         strategy.register_hook(std::make_shared<TrainingUpdateOrchestrator>(),
                                                TrainingStage::BeforeBatch);
                       }),
                       "stage= is not supported"));
  EXPECT_TRUE(strategy.hooks().empty());
}

TEST(TrainingStrategyHooks, AHookWithoutStageIsRejected) {
  auto stageless = std::make_shared<CallbackHook>(std::set<TrainingStage>{},
                                                  [](TrainContext&, TrainingStage) {});
  EXPECT_TRUE(contains(error_message([&] { TrainingStrategy s(linear_options({stageless})); }),
                       "has no stage assigned"));
}

TEST(TrainingStrategyHooks, PlainDoBackwardOwnerReplacesTheDefaultBackward) {
  int calls = 0;
  auto owner = std::make_shared<CallbackHook>(TrainingStage::DoBackward,
                                              [&](TrainContext& ctx, TrainingStage) {
                                                ++calls;
                                                ctx.loss.backward();
                                              });
  TrainingStrategy strategy(linear_options({owner}));
  strategy.run(linear_batches(1));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(strategy.counters().step_count, 1);
}

TEST(TrainingStrategyHooks, PlainDoOptimizerStepOwnerSuppressesTheDefaultStep) {
  int calls = 0;
  auto owner = std::make_shared<CallbackHook>(TrainingStage::DoOptimizerStep,
                                              [&](TrainContext&, TrainingStage) { ++calls; });
  TrainingStrategy strategy(linear_options({owner}));
  const auto weights = otf::testing::clones(strategy.models().at("main")->parameters());
  strategy.run(linear_batches(1));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(strategy.counters().step_count, 1) << "a plain claimant's step counts as run";
  EXPECT_TRUE(otf::testing::bitwise_equal(
      weights, otf::testing::clones(strategy.models().at("main")->parameters())));
}

TEST(TrainingStrategyHooks, DefaultPathZeroesGradientsToNoneAndStepsSchedulers) {
  std::vector<bool> grad_defined_at_forward;
  auto observer = std::make_shared<CallbackHook>(
      TrainingStage::BeforeForward, [&](TrainContext& ctx, TrainingStage) {
        grad_defined_at_forward.push_back(
            ctx.models->at("main")->parameters().front().grad().defined());
      });
  CountingScheduler* scheduler = nullptr;
  TrainingStrategyOptions options = linear_options({observer});
  options.optimizer_configs[0].make_scheduler = [&scheduler](torch::optim::Optimizer&) {
    auto made = std::make_unique<CountingScheduler>();
    scheduler = made.get();
    return made;
  };
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(3));
  EXPECT_EQ(grad_defined_at_forward, (std::vector<bool>{false, false, false}));
  ASSERT_NE(scheduler, nullptr);
  EXPECT_EQ(scheduler->steps, 3);
}

// ---- Lifecycle ---------------------------------------------------------------------------------

TEST(TrainingStrategyLifecycle, EntersInOrderExitsInReverseAndNests) {
  std::vector<std::string> log;
  auto first = std::make_shared<LifecycleHook>("first", log);
  auto second = std::make_shared<LifecycleHook>("second", log);
  auto update = std::make_shared<ScriptedUpdateHook>(50, "update");
  update->log = &log;
  TrainingStrategy strategy(linear_options({first, update, second}));
  {
    TrainingStrategy::Scope outer(strategy);
    TrainingStrategy::Scope inner(strategy);
    log.push_back("inside");
    strategy.run(linear_batches(1));  // does not re-enter
    inner.close();
  }
  std::vector<std::string> lifecycle;
  for (const auto& entry : log) {
    if (entry.rfind("enter:", 0) == 0 || entry.rfind("exit:", 0) == 0 || entry == "inside") {
      lifecycle.push_back(entry);
    }
  }
  EXPECT_EQ(lifecycle,
            (std::vector<std::string>{"enter:first", "enter:update", "enter:second", "inside",
                                      "exit:second", "exit:update", "exit:first"}));
  EXPECT_FALSE(strategy.is_entered());
}

TEST(TrainingStrategyLifecycle, AHookErrorLeavesTheLifecycleAndALaterRunWorks) {
  std::vector<std::string> log;
  auto lifecycle = std::make_shared<LifecycleHook>("hook", log);
  bool fail = true;
  auto failing =
      std::make_shared<CallbackHook>(TrainingStage::AfterLoss, [&](TrainContext&, TrainingStage) {
        if (fail) throw std::runtime_error("boom");
      });
  TrainingStrategy strategy(linear_options({lifecycle, failing}));
  EXPECT_THROW(strategy.run(linear_batches(1)), std::runtime_error);
  EXPECT_FALSE(strategy.is_entered());
  EXPECT_EQ(log, (std::vector<std::string>{"enter:hook", "exit:hook"}));
  fail = false;
  strategy.run(linear_batches(1));
  EXPECT_EQ(strategy.counters().step_count, 1);
}

// ---- train_batch -------------------------------------------------------------------------------

TEST(TrainingStrategyTrainBatch, FiresSetupEveryCallAndNoRunStages) {
  auto recorder = std::make_shared<StageRecorder>();
  TrainingStrategyOptions options = linear_options({recorder});
  options.num_epochs.reset();  // train_batch needs no target
  TrainingStrategy strategy(std::move(options));
  const auto batches = linear_batches(2);
  EXPECT_TRUE(strategy.train_batch(batches[0]));
  torch::optim::Optimizer* const optimizer = strategy.optimizers().at(0);
  EXPECT_TRUE(strategy.train_batch(batches[1]));
  EXPECT_EQ(strategy.optimizers().at(0), optimizer) << "optimizers are built once";
  int setups = 0;
  for (const TrainingStage stage : recorder->stages) {
    EXPECT_NE(stage, TrainingStage::BeforeTraining);
    EXPECT_NE(stage, TrainingStage::BeforeEpoch);
    EXPECT_NE(stage, TrainingStage::AfterEpoch);
    EXPECT_NE(stage, TrainingStage::AfterTraining);
    setups += stage == TrainingStage::Setup ? 1 : 0;
  }
  EXPECT_EQ(setups, 2);
  const TrainingCounters expected{2, 2, 2, 2, 0};
  EXPECT_EQ(strategy.counters(), expected);
  EXPECT_THROW(strategy.run(batches), std::invalid_argument) << "run() needs a target";
}

TEST(TrainingStrategyTrainBatch, ReturnsFalseWhenTheStepIsVetoed) {
  auto accumulate = accumulation_hook(2);
  TrainingStrategy strategy(linear_options({accumulate}));
  const auto batches = linear_batches(2);
  EXPECT_FALSE(strategy.train_batch(batches[0]));
  EXPECT_TRUE(strategy.train_batch(batches[1]));
  const TrainingCounters expected{1, 1, 2, 2, 0};
  EXPECT_EQ(strategy.counters(), expected);
}

// ---- Models ------------------------------------------------------------------------------------

TEST(TrainingStrategyModels, ModelsWithoutOptimizerAreFrozenDuringTrainingThenRestored) {
  TrainingStrategyOptions options = linear_options();
  auto teacher = otf::testing::linear_model({1.0f, 1.0f, 1.0f});
  options.models["teacher"] = teacher;
  std::vector<bool> teacher_state;
  options.hooks = {std::make_shared<CallbackHook>(
      TrainingStage::BeforeForward, [&](TrainContext& ctx, TrainingStage) {
        teacher_state.push_back(ctx.models->at("teacher")->is_training());
        teacher_state.push_back(teacher->parameters().front().requires_grad());
        teacher_state.push_back(ctx.models->at("main")->is_training());
      })};
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(1));
  EXPECT_EQ(teacher_state, (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(teacher->is_training());
  EXPECT_TRUE(teacher->parameters().front().requires_grad());
}

TEST(TrainingStrategyModels, ConfigurationErrorsSayWhatIsWrong) {
  auto with = [](auto edit) {
    TrainingStrategyOptions options = linear_options();
    edit(options);
    return error_message([&] { TrainingStrategy strategy(std::move(options)); });
  };
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.models.clear(); }),
                       "models must not be empty"));
  EXPECT_TRUE(contains(
      with([](TrainingStrategyOptions& o) { o.optimizer_configs[0].model_key = "student"; }),
      "names model 'student', which is not among the models (main)"));
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.optimizer_configs.clear(); }),
                       "optimizer_configs must not be empty"));
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.num_steps = 3; }), "not both"));
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.num_epochs = 0; }),
                       "num_epochs must be >= 1"));
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.epoch_step_modifier = 0.0; }),
                       "epoch_step_modifier"));
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.devices.clear(); }),
                       "devices must not be empty"));
  EXPECT_TRUE(contains(with([](TrainingStrategyOptions& o) { o.training_fn = nullptr; }),
                       "training_fn is required"));

  TrainingStrategyOptions frozen = linear_options();
  for (auto& parameter : frozen.models.at("main")->parameters()) parameter.requires_grad_(false);
  TrainingStrategy strategy(std::move(frozen));
  EXPECT_TRUE(
      contains(error_message([&] { strategy.run(linear_batches(1)); }), "no trainable parameters"));
}

// ---- Validation --------------------------------------------------------------------------------

TEST(TrainingStrategyValidation, SummaryAfterValidationAndMetricDrivenSchedules) {
  std::vector<CountingScheduler*> schedulers;
  std::vector<double> total_seen_at_after_validation;
  auto observer = std::make_shared<CallbackHook>(
      TrainingStage::AfterValidation, [&](TrainContext& ctx, TrainingStage) {
        ASSERT_TRUE(ctx.validation.has_value());
        ASSERT_NE(ctx.batch, nullptr) << "the last training batch";
        total_seen_at_after_validation.push_back(ctx.validation->at("total_loss"));
        // Metric-driven schedules have not consumed it yet.
        EXPECT_TRUE(schedulers.at(0)->metrics.empty());
      });
  TrainingStrategyOptions options = linear_options({observer});
  options.optimizer_configs[0].make_scheduler = [&](torch::optim::Optimizer&) {
    auto made = std::make_unique<CountingScheduler>(/*metric_driven=*/true);
    schedulers.push_back(made.get());
    return made;
  };
  TrainingStrategy strategy(std::move(options));
  const auto validation_batches = linear_batches(3);

  // Before any training batch: a summary, but no AFTER_VALIDATION and no schedules yet.
  const otf::ValidationSummary early = strategy.validate(validation_batches);
  EXPECT_TRUE(total_seen_at_after_validation.empty());

  strategy.run(linear_batches(2));
  ASSERT_EQ(schedulers.size(), 1u);
  EXPECT_EQ(schedulers[0]->steps, 0) << "never stepped per batch";

  const otf::ValidationSummary summary = strategy.validate(validation_batches);
  double expected_total = 0.0;
  for (const auto& batch : validation_batches) {
    const auto predictions = otf::testing::linear_training_fn(strategy.models(), batch);
    expected_total +=
        otf::testing::energy_mse_loss(predictions, batch, 0, 0).total_loss.item<double>();
  }
  expected_total /= 3.0;
  EXPECT_NEAR(summary.at("total_loss"), expected_total, 1e-6);
  EXPECT_NEAR(summary.at("per_component_unweighted/energy"), expected_total, 1e-6);
  EXPECT_EQ(summary.at("num_batches"), 3.0);
  EXPECT_LT(summary.at("total_loss"), early.at("total_loss")) << "training helped";
  EXPECT_EQ(total_seen_at_after_validation, std::vector<double>{summary.at("total_loss")});
  EXPECT_EQ(schedulers[0]->metrics, std::vector<double>{summary.at("total_loss")});
  EXPECT_FALSE(strategy.last_validation().has_value()) << "consumed by the metric schedule";
  EXPECT_TRUE(strategy.models().at("main")->is_training()) << "modes restored";
}

TEST(TrainingStrategyValidation, MissingMetricKeyListsTheEntries) {
  TrainingStrategyOptions options = linear_options();
  options.optimizer_configs[0].scheduler_metric_key = "force_rmse";
  options.optimizer_configs[0].make_scheduler = [](torch::optim::Optimizer&) {
    return std::make_unique<CountingScheduler>(/*metric_driven=*/true);
  };
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(1));
  const std::string message = error_message([&] { strategy.validate(linear_batches(1)); });
  EXPECT_TRUE(contains(message, "'force_rmse'")) << message;
  EXPECT_TRUE(contains(message, "total_loss")) << message;
}

// ---- Data parallelism --------------------------------------------------------------------------

TEST(TrainingStrategyDataParallel, GlobalStepCountRankAndGradientSum) {
  std::vector<std::pair<int64_t, int64_t>> counts;
  std::vector<int> ranks;
  std::vector<torch::Tensor> gradients;
  auto observer = std::make_shared<CallbackHook>(
      std::set<TrainingStage>{TrainingStage::AfterBackward, TrainingStage::AfterBatch},
      [&](TrainContext& ctx, TrainingStage stage) {
        if (stage == TrainingStage::AfterBackward) {
          gradients.push_back(ctx.models->at("main")->parameters().front().grad().clone());
          return;
        }
        counts.emplace_back(ctx.counters.step_count, ctx.counters.global_step_count);
        ranks.push_back(ctx.global_rank);
      });
  TrainingStrategy single(linear_options({observer}));
  single.run(linear_batches(2));
  const std::vector<torch::Tensor> single_gradients = gradients;
  gradients.clear();
  counts.clear();
  ranks.clear();

  TrainingStrategy parallel(linear_options({observer}));
  auto communicator = std::make_shared<IdenticalRanksCommunicator>(2, 4);
  parallel.set_communicator(communicator);
  parallel.run(linear_batches(2));
  EXPECT_EQ(counts, (std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {2, 8}}));
  EXPECT_EQ(ranks, (std::vector<int>{2, 2}));
  EXPECT_EQ(communicator->tensor_reductions, 2);
  // The first batch starts from the same weights: its gradient is summed over four ranks.
  ASSERT_EQ(gradients.size(), 2u);
  EXPECT_TRUE(torch::allclose(gradients[0], 4 * single_gradients[0]));
}

TEST(TrainingStrategyDataParallel, AccumulatedGradientsAreReducedOncePerMicroBatch) {
  // Two micro-batches accumulated: the sum over ranks must be 4 (g1 + g2), not 16 g1 + 4 g2.
  std::vector<torch::Tensor> accumulated;
  auto observer = std::make_shared<CallbackHook>(
      TrainingStage::BeforeOptimizerStep, [&](TrainContext& ctx, TrainingStage) {
        if (ctx.counters.batch_count == 1) {
          accumulated.push_back(ctx.models->at("main")->parameters().front().grad().clone());
        }
      });
  auto accumulating_options = [&] {
    TrainingStrategyOptions options = linear_options({observer, accumulation_hook(2)});
    options.num_epochs.reset();
    options.num_steps = 1;
    return options;
  };
  TrainingStrategy single(accumulating_options());
  single.run(linear_batches(2));
  TrainingStrategy parallel(accumulating_options());
  parallel.set_communicator(std::make_shared<IdenticalRanksCommunicator>(0, 4));
  parallel.run(linear_batches(2));
  ASSERT_EQ(accumulated.size(), 2u);
  EXPECT_TRUE(torch::allclose(accumulated[1], 4 * accumulated[0]))
      << accumulated[1] << " vs 4 x " << accumulated[0];
}

}  // namespace

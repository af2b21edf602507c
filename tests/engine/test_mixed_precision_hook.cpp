// MixedPrecisionHook against its contract (docs/design.md §7.5 and §7.6), driven through the
// strategy on CPU (float16 is emulated by AutocastRegion): construction and aliases, autocast
// scope, the float16 call order with two optimizers, vetoes, a real fp16 overflow, exclusivity,
// the late-veto hazard, lifecycle and checkpoint state.
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_autocast_policy.h"
#include "grad_scaler.h"
#include "mixed_precision_hook.h"
#include "precision_dtype.h"
#include "torch_compat.h"
#include "training_test_support.h"
#include "training_update_orchestrator.h"

namespace {

using otf::CallbackHook;
using otf::MixedPrecisionHook;
using otf::Precision;
using otf::TrainContext;
using otf::TrainingStage;
using otf::TrainingStrategy;
using otf::TrainingStrategyOptions;
using otf::testing::accumulation_hook;
using otf::testing::CountingScheduler;
using otf::testing::error_message;
using otf::testing::linear_batches;
using otf::testing::linear_options;
using otf::testing::ScriptedUpdateHook;
using otf::testing::StageRecorder;

constexpr Precision kAllPrecisions[] = {Precision::Float32, Precision::BFloat16,
                                        Precision::Float16};

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// What autocast does on this thread's CPU: nothing, or the precision it runs matmuls in (float16
// is LibTorch's bfloat16 key plus the emulation flag, autocast_region.h).
std::optional<Precision> cpu_autocast_precision() {
  if (!otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU)) return std::nullopt;
  if (otf::is_cpu_fp16_emulation_enabled()) return Precision::Float16;
  return otf::precision_from_dtype(otf::torch_compat::autocast_dtype(c10::DeviceType::CPU));
}

std::optional<Precision> expected_autocast(Precision precision) {
  if (precision == Precision::Float32) return std::nullopt;
  return precision;
}

class CapturingWarningHandler final : public otf::torch_compat::CallbackWarningHandler {
 public:
  CapturingWarningHandler()
      : CallbackWarningHandler(
            [this](const std::string& message) { messages.push_back(message); }) {}
  std::vector<std::string> messages;
};

// ---- Construction ------------------------------------------------------------------------------

TEST(MixedPrecisionHookConstruction, AcceptsDtypesCanonicalNamesAndAliases) {
  EXPECT_EQ(MixedPrecisionHook(Precision::BFloat16).precision(), Precision::BFloat16);
  EXPECT_EQ(MixedPrecisionHook("float16").precision(), Precision::Float16);
  EXPECT_EQ(MixedPrecisionHook("bfloat16").precision(), Precision::BFloat16);
  EXPECT_EQ(MixedPrecisionHook("bf16").precision(), Precision::BFloat16);
  EXPECT_EQ(MixedPrecisionHook("fp16").precision(), Precision::Float16);
  EXPECT_EQ(MixedPrecisionHook("fp32").precision(), Precision::Float32);
  EXPECT_EQ(MixedPrecisionHook("torch.float16").precision(), Precision::Float16);
  EXPECT_EQ(MixedPrecisionHook(torch::kFloat16).precision(), Precision::Float16);
  EXPECT_EQ(MixedPrecisionHook(torch::kBFloat16).precision(), Precision::BFloat16);
  EXPECT_EQ(MixedPrecisionHook(torch::kFloat32).precision(), Precision::Float32);
}

TEST(MixedPrecisionHookConstruction, RejectsOtherPrecisionsListingTheAcceptedOnes) {
  for (const char* bad : {"fp8", "fp64", "float64", "half"}) {
    const std::string message = error_message([&] { MixedPrecisionHook hook(bad); });
    EXPECT_TRUE(contains(message,
                         "MixedPrecisionHook.precision must be one of (float32, "
                         "bfloat16, float16)"))
        << message;
    EXPECT_TRUE(contains(message, std::string("got '") + bad + "'")) << message;
  }
  const std::string message = error_message([] { MixedPrecisionHook hook(torch::kFloat64); });
  EXPECT_TRUE(contains(message, "must be one of (float32, bfloat16, float16); got Double"))
      << message;
  EXPECT_THROW(MixedPrecisionHook(Precision::Float16, otf::GradScalerOptions{65536.0, 0.5}),
               std::invalid_argument)
      << "GradScaler options are checked at construction";
}

TEST(MixedPrecisionHookConstruction, IsAnUpdateHookWithPriorityTwentyAndAnExclusiveKey) {
  static_assert(std::is_base_of_v<otf::TrainingUpdateHook, MixedPrecisionHook>);
  static_assert(!std::is_base_of_v<otf::Hook, MixedPrecisionHook>,
                "registered through the orchestrator, never as a plain hook");
  static_assert(std::is_base_of_v<otf::Checkpointable, MixedPrecisionHook>);
  const MixedPrecisionHook hook(Precision::Float16);
  EXPECT_EQ(hook.priority(), 20);
  EXPECT_EQ(hook.exclusive_key(), std::optional<std::string>("MixedPrecisionHook"));
  EXPECT_EQ(hook.grad_scaler_options().init_scale, 65536.0);
  EXPECT_EQ(hook.grad_scaler_options().growth_factor, 2.0);
  EXPECT_EQ(hook.grad_scaler_options().backoff_factor, 0.5);
  EXPECT_EQ(hook.grad_scaler_options().growth_interval, 2000);
}

TEST(MixedPrecisionHookConstruction, StrategyAutoWrapsItIntoTheOrchestrator) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::BFloat16);
  TrainingStrategy strategy(linear_options({mp}));
  ASSERT_EQ(strategy.hooks().size(), 1u);
  ASSERT_NE(strategy.update_orchestrator(), nullptr);
  EXPECT_EQ(strategy.hooks().front().get(), strategy.update_orchestrator());
  EXPECT_EQ(strategy.update_orchestrator()->hooks(),
            (std::vector<std::shared_ptr<otf::TrainingUpdateHook>>{mp}));
  EXPECT_EQ(strategy.mixed_precision_hook(), mp.get());
}

TEST(MixedPrecisionHookConstruction, UnclaimedStageIsANoOp) {
  MixedPrecisionHook hook(Precision::Float16);
  TrainContext ctx;
  ctx.loss = torch::tensor(2.0);
  const otf::UpdateResult result = hook.call(ctx, TrainingStage::AfterBatch, false);
  EXPECT_TRUE(result.proceed);
  EXPECT_TRUE(result.loss.is_same(ctx.loss));
  EXPECT_EQ(hook.grad_scaler(), nullptr);
  EXPECT_FALSE(hook.autocast_active());
  EXPECT_EQ(ctx.grad_scaler, nullptr);
}

// ---- Exclusivity -------------------------------------------------------------------------------

TEST(MixedPrecisionHookExclusivity, TwoHooksAreRejected) {
  auto first = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  auto second = std::make_shared<MixedPrecisionHook>(Precision::BFloat16);
  const std::string message = error_message([&] {
    TrainingStrategy strategy(linear_options({first, second}));
  });
  EXPECT_EQ(message,
            "Only one update hook with exclusive key 'MixedPrecisionHook' may be registered; got "
            "MixedPrecisionHook and MixedPrecisionHook.");
  TrainingStrategy strategy(linear_options({first}));
  EXPECT_TRUE(
      contains(error_message([&] { strategy.register_hook(second); }), "MixedPrecisionHook"));
  EXPECT_EQ(strategy.update_orchestrator()->hooks().size(), 1u);
}

TEST(MixedPrecisionHookExclusivity, AnotherDoBackwardClaimantIsRejected) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  auto backward_owner = std::make_shared<CallbackHook>(
      TrainingStage::DoBackward, [](TrainContext& ctx, TrainingStage) { ctx.loss.backward(); });
  const std::string message = error_message([&] {
    TrainingStrategy strategy(linear_options({mp, backward_owner}));
  });
  EXPECT_TRUE(contains(message, "At most one hook may claim DO_BACKWARD")) << message;
}

// ---- Autocast scope and loss contract ----------------------------------------------------------

TEST(MixedPrecisionHookTraining, OneStepCompletesCleanlyInEveryPrecisionWithoutWarnings) {
  for (const Precision precision : kAllPrecisions) {
    CapturingWarningHandler warnings;
    otf::torch_compat::WarningHandlerGuard guard(&warnings);
    auto mp = std::make_shared<MixedPrecisionHook>(precision);
    TrainingStrategy strategy(linear_options({mp}));
    const auto weights = otf::testing::clones(strategy.models().at("main")->parameters());
    strategy.run(linear_batches(1));
    EXPECT_EQ(strategy.counters().step_count, 1) << precision;
    EXPECT_FALSE(otf::testing::bitwise_equal(
        weights, otf::testing::clones(strategy.models().at("main")->parameters())))
        << precision;
    EXPECT_TRUE(warnings.messages.empty())
        << precision << ": " << (warnings.messages.empty() ? "" : warnings.messages.front());
    if (precision == Precision::Float16) {
      ASSERT_NE(strategy.grad_scaler(), nullptr);
      EXPECT_EQ(strategy.grad_scaler()->get_scale(), 65536.0);
      EXPECT_EQ(strategy.grad_scaler()->get_growth_tracker(), 1);
    } else {
      EXPECT_EQ(strategy.grad_scaler(), nullptr) << precision;
    }
  }
}

TEST(MixedPrecisionHookTraining, AutocastIsOnFromBeforeBatchUntilInsideDoBackward) {
  for (const Precision precision : kAllPrecisions) {
    std::vector<std::pair<std::string, std::optional<Precision>>> seen;
    auto recorder = std::make_shared<StageRecorder>([&](TrainContext&, TrainingStage stage) {
      if (stage >= TrainingStage::BeforeForward && stage <= TrainingStage::AfterBatch) {
        seen.emplace_back(to_string(stage), cpu_autocast_precision());
      }
    });
    // Update hooks below and above priority 20 see DO_BACKWARD inside and outside the region.
    auto before_mp = std::make_shared<ScriptedUpdateHook>(10, "before_mp");
    auto after_mp = std::make_shared<ScriptedUpdateHook>(30, "after_mp");
    for (auto* hook : {before_mp.get(), after_mp.get()}) {
      hook->on_call = [&seen, hook](TrainContext&, TrainingStage stage, bool) {
        if (stage == TrainingStage::DoBackward) {
          seen.emplace_back(hook->label + ":DO_BACKWARD", cpu_autocast_precision());
        }
      };
    }
    auto mp = std::make_shared<MixedPrecisionHook>(precision);
    TrainingStrategy strategy(linear_options({recorder, before_mp, mp, after_mp}));
    strategy.run(linear_batches(1));

    const std::optional<Precision> on = expected_autocast(precision);
    const std::vector<std::pair<std::string, std::optional<Precision>>> expected = {
        {"BEFORE_FORWARD", on},
        {"AFTER_FORWARD", on},
        {"BEFORE_LOSS", on},
        {"AFTER_LOSS", on},
        {"BEFORE_BACKWARD", on},
        {"before_mp:DO_BACKWARD", on},
        {"after_mp:DO_BACKWARD", std::nullopt},
        {"AFTER_BACKWARD", std::nullopt},
        {"BEFORE_OPTIMIZER_STEP", std::nullopt},
        {"AFTER_OPTIMIZER_STEP", std::nullopt},
        {"AFTER_BATCH", std::nullopt}};
    EXPECT_EQ(seen, expected) << precision;
    EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU))
        << "nothing leaks out of the run";
    if (precision == Precision::Float32) {
      EXPECT_EQ(mp->grad_scaler(), nullptr) << "float32 creates no scaler";
    }
  }
}

TEST(MixedPrecisionHookTraining, DrivenDirectlyTheRegionIsEnteredOnceAndTheScalerCreatedLazily) {
  // No workflow: the primary device is the CPU.
  MixedPrecisionHook hook(Precision::Float16);
  EXPECT_EQ(hook.grad_scaler(), nullptr) << "nothing before the first BEFORE_BATCH";
  TrainContext ctx;
  hook.call(ctx, TrainingStage::BeforeBatch, false);
  ASSERT_NE(hook.grad_scaler(), nullptr);
  EXPECT_EQ(ctx.grad_scaler, hook.grad_scaler());
  EXPECT_TRUE(hook.autocast_active());
  EXPECT_EQ(cpu_autocast_precision(), Precision::Float16);
  // A second BEFORE_BATCH while active does not enter again: one DO_BACKWARD leaves autocast.
  hook.call(ctx, TrainingStage::BeforeBatch, false);
  otf::GradScaler* const scaler = hook.grad_scaler();
  ctx.loss = torch::tensor(0.5);
  ctx.grad_scaler = nullptr;
  const otf::UpdateResult result = hook.call(ctx, TrainingStage::DoBackward, false);
  EXPECT_FALSE(hook.autocast_active());
  EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(result.loss.item<double>(), 0.5 * 65536.0) << "the scaled loss";
  EXPECT_EQ(ctx.grad_scaler, scaler) << "set again at DO_BACKWARD";
  EXPECT_EQ(hook.grad_scaler(), scaler) << "one scaler per hook";
}

TEST(MixedPrecisionHookTraining, AFailedBatchDoesNotLeaveAutocastOnInsideAnOuterScope) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::BFloat16);
  TrainingStrategyOptions options = linear_options({mp});
  options.loss_fn = [](const otf::Predictions&, const otf::TrainingBatch&, int64_t,
                       int64_t) -> otf::LossOutput { throw std::runtime_error("bad labels"); };
  TrainingStrategy strategy(std::move(options));
  TrainingStrategy::Scope session(strategy);  // as the LAMMPS fix holds one for a whole run
  EXPECT_THROW(strategy.train_batch(linear_batches(1)[0]), std::runtime_error);
  EXPECT_TRUE(strategy.is_entered());
  EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_FALSE(mp->autocast_active());
}

TEST(MixedPrecisionHookTraining, Float32CreatesNoAutocastStateAndNoScaler) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float32);
  std::vector<bool> state;
  auto probe = std::make_shared<CallbackHook>(
      TrainingStage::BeforeForward, [&](TrainContext& ctx, TrainingStage) {
        state = {mp->grad_scaler() != nullptr, mp->autocast_active(), ctx.grad_scaler != nullptr};
      });
  TrainingStrategy strategy(linear_options({mp, probe}));
  strategy.run(linear_batches(1));
  EXPECT_EQ(state, (std::vector<bool>{false, false, false}));
}

TEST(MixedPrecisionHookTraining, LossHasAGraphUntilBackwardAndIsTheUnscaledTotalAfter) {
  std::vector<double> loss_values;
  std::vector<bool> has_grad_fn;
  auto probe = std::make_shared<CallbackHook>(
      std::set<TrainingStage>{TrainingStage::AfterLoss, TrainingStage::BeforeBackward,
                              TrainingStage::AfterBackward},
      [&](TrainContext& ctx, TrainingStage) {
        loss_values.push_back(ctx.loss.item<double>());
        has_grad_fn.push_back(ctx.loss.grad_fn() != nullptr);
      });
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategy strategy(linear_options({probe, mp}));
  strategy.run(linear_batches(1));
  EXPECT_EQ(has_grad_fn, (std::vector<bool>{true, true, false}));
  ASSERT_EQ(loss_values.size(), 3u);
  EXPECT_EQ(loss_values[2], loss_values[0]) << "AFTER_BACKWARD sees the unscaled total";
}

TEST(MixedPrecisionHookTraining, GradientsAreZeroedToNoneAtBeforeBatch) {
  std::vector<bool> grad_defined;
  auto probe = std::make_shared<CallbackHook>(
      std::set<TrainingStage>{TrainingStage::BeforeForward, TrainingStage::AfterBackward},
      [&](TrainContext& ctx, TrainingStage) {
        grad_defined.push_back(ctx.models->at("main")->parameters().front().grad().defined());
      });
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategy strategy(linear_options({probe, mp}));
  strategy.run(linear_batches(2));
  EXPECT_EQ(grad_defined, (std::vector<bool>{false, true, false, true}));
}

TEST(MixedPrecisionHookTraining, ScalesTheLossWithTheConfiguredInitialScale) {
  otf::GradScalerOptions options;
  options.init_scale = 1024.0;
  auto mp = std::make_shared<MixedPrecisionHook>("fp16", options);
  double live_loss = 0.0;
  double loss_for_backward = 0.0;
  auto observer = std::make_shared<ScriptedUpdateHook>(30, "observer");
  observer->on_call = [&](TrainContext& ctx, TrainingStage stage, bool) {
    if (stage == TrainingStage::DoBackward) loss_for_backward = ctx.loss.item<double>();
  };
  auto probe = std::make_shared<CallbackHook>(
      TrainingStage::AfterLoss,
      [&](TrainContext& ctx, TrainingStage) { live_loss = ctx.loss.item<double>(); });
  TrainingStrategy strategy(linear_options({probe, mp, observer}));
  strategy.run(linear_batches(1));
  EXPECT_FLOAT_EQ(loss_for_backward, 1024.0 * live_loss);
}

// ---- The float16 call order --------------------------------------------------------------------

// SGD that logs its step() and the GradScaler's growth tracker at that moment.
class RecordingSGD final : public torch::optim::SGD {
 public:
  RecordingSGD(std::vector<torch::Tensor> parameters, std::string label,
               std::function<void(const std::string&)> record)
      : SGD(std::move(parameters), torch::optim::SGDOptions(0.01)),
        label_(std::move(label)),
        record_(std::move(record)) {}
  torch::Tensor step(LossClosure closure = nullptr) override {
    record_("step:" + label_);
    return SGD::step(std::move(closure));
  }

 private:
  std::string label_;
  std::function<void(const std::string&)> record_;
};

TrainingStrategyOptions two_optimizer_options(std::vector<otf::HookEntry> hooks,
                                              std::function<void(const std::string&)> record) {
  TrainingStrategyOptions options = linear_options(std::move(hooks));
  options.models["aux"] = otf::testing::linear_model({-0.2f, 0.1f, 0.4f});
  options.training_fn = [](const otf::NamedModels& models, const otf::TrainingBatch& batch) {
    auto& main = *models.at("main")->as<otf::testing::LinearModel>();
    auto& aux = *models.at("aux")->as<otf::testing::LinearModel>();
    const torch::Tensor x = batch.at("x");
    return otf::Predictions{{"energy", (main.linear(x) + aux.linear(x)).squeeze(-1)}};
  };
  options.optimizer_configs.clear();
  for (const std::string key : {"main", "aux"}) {
    otf::OptimizerConfig config;
    config.model_key = key;
    config.make_optimizer = [key, record](std::vector<torch::Tensor> parameters) {
      return std::make_unique<RecordingSGD>(std::move(parameters), key, record);
    };
    options.optimizer_configs.push_back(std::move(config));
  }
  return options;
}

TEST(MixedPrecisionHookFloat16, CallOrderIsScaleThenUnscaleEachThenStepEachThenUpdate) {
  std::vector<std::string> log;
  TrainingStrategy* strategy_ptr = nullptr;
  auto tracker = [&] { return strategy_ptr->grad_scaler()->get_growth_tracker(); };
  auto record = [&](const std::string& event) {
    log.push_back(event + "@tracker" + std::to_string(tracker()));
  };
  // Scaled gradients of each model's weight, seen by a hook before MixedPrecisionHook unscales.
  std::map<std::string, torch::Tensor> scaled_grads;
  auto grad_of = [&](const std::string& key) {
    return strategy_ptr->models().at(key)->parameters().front().grad();
  };
  auto is_unscaled = [&](const std::string& key) {
    return torch::allclose(grad_of(key) * 65536.0, scaled_grads.at(key));
  };
  double live_loss = 0.0;
  auto probe = std::make_shared<CallbackHook>(
      TrainingStage::AfterLoss,
      [&](TrainContext& ctx, TrainingStage) { live_loss = ctx.loss.item<double>(); });
  auto before_mp = std::make_shared<ScriptedUpdateHook>(10, "before_mp");
  before_mp->on_call = [&](TrainContext&, TrainingStage stage, bool) {
    if (stage == TrainingStage::DoOptimizerStep) {
      for (const std::string key : {"main", "aux"}) scaled_grads[key] = grad_of(key).clone();
    }
  };
  auto after_mp = std::make_shared<ScriptedUpdateHook>(30, "after_mp");
  after_mp->on_call = [&](TrainContext& ctx, TrainingStage stage, bool) {
    if (stage == TrainingStage::BeforeBatch) {
      // GradScaler calls its found-inf reducer once per optimizer inside unscale_.
      ASSERT_NE(ctx.grad_scaler, nullptr);
      ctx.grad_scaler->set_found_inf_reducer([&](torch::Tensor&) {
        record(std::string("unscale_(main ") + (is_unscaled("main") ? "done" : "pending") +
               ", aux " + (is_unscaled("aux") ? "done" : "pending") + ")");
      });
    } else if (stage == TrainingStage::DoBackward) {
      if (std::abs(ctx.loss.item<double>() - 65536.0 * live_loss) <= 1e-6 * 65536.0 * live_loss) {
        record("scale");
      }
    } else if (stage == TrainingStage::AfterOptimizerStep) {
      record("after");
    }
  };
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategy strategy(two_optimizer_options({probe, before_mp, mp, after_mp}, record));
  strategy_ptr = &strategy;
  strategy.run(linear_batches(1));
  EXPECT_EQ(
      log, (std::vector<std::string>{"scale@tracker0", "unscale_(main done, aux pending)@tracker0",
                                     "unscale_(main done, aux done)@tracker0", "step:main@tracker0",
                                     "step:aux@tracker0", "after@tracker1"}));
  EXPECT_EQ(strategy.counters().step_count, 1);
}

TEST(MixedPrecisionHookFloat16, AnEarlierVetoSuppressesUnscaleStepAndUpdate) {
  std::vector<std::string> log;
  auto vetoing = std::make_shared<ScriptedUpdateHook>(10, "veto");
  vetoing->veto = [](TrainingStage stage, int64_t) {
    return stage == TrainingStage::DoOptimizerStep;
  };
  std::vector<bool> mp_saw_will_skip;
  torch::Tensor scaled_grad;
  auto after_mp = std::make_shared<ScriptedUpdateHook>(30, "after_mp");
  after_mp->on_call = [&](TrainContext& ctx, TrainingStage stage, bool will_skip) {
    if (stage == TrainingStage::BeforeBatch) {
      ctx.grad_scaler->set_found_inf_reducer([&](torch::Tensor&) { log.push_back("unscale_"); });
    }
    if (stage == TrainingStage::DoOptimizerStep) {
      mp_saw_will_skip.push_back(will_skip);
      scaled_grad = ctx.models->at("main")->parameters().front().grad().clone();
    }
  };
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategyOptions options = two_optimizer_options(
      {vetoing, mp, after_mp}, [&](const std::string& e) { log.push_back(e); });
  options.num_epochs.reset();
  options.num_steps = 1;
  TrainingStrategy strategy(std::move(options));
  const auto weights = otf::testing::clones(strategy.models().at("main")->parameters());
  strategy.train_batch(linear_batches(1)[0]);
  EXPECT_TRUE(log.empty()) << "no unscale_ and no step";
  EXPECT_EQ(mp_saw_will_skip, std::vector<bool>{true});
  EXPECT_EQ(strategy.grad_scaler()->get_growth_tracker(), 0) << "no update()";
  EXPECT_EQ(strategy.grad_scaler()->get_scale(), 65536.0);
  EXPECT_TRUE(otf::testing::bitwise_equal(
      weights, otf::testing::clones(strategy.models().at("main")->parameters())));
  // Backward still ran on the scaled loss: the gradients are scaled by 65536 (O(1) unscaled).
  EXPECT_GT(scaled_grad.abs().max().item<double>(), 1000.0);
  EXPECT_EQ(strategy.counters().step_count, 0);
}

TEST(MixedPrecisionHookFloat16, SchedulerStepsIffNoInfAndARealOverflowLeavesParametersUntouched) {
  for (const double init_scale : {65536.0, std::ldexp(1.0, 40)}) {
    CountingScheduler* scheduler = nullptr;
    otf::GradScalerOptions scaler_options;
    scaler_options.init_scale = init_scale;
    auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16, scaler_options);
    auto observer = std::make_shared<ScriptedUpdateHook>(50, "observer");
    TrainingStrategyOptions options = linear_options({mp, observer});
    options.num_epochs.reset();
    options.num_steps = 1;
    options.optimizer_configs[0].make_scheduler = [&scheduler](torch::optim::Optimizer&) {
      auto made = std::make_unique<CountingScheduler>();
      scheduler = made.get();
      return made;
    };
    TrainingStrategy strategy(std::move(options));
    const auto weights = otf::testing::clones(strategy.models().at("main")->parameters());
    const bool stepped = strategy.train_batch(linear_batches(1)[0]);
    ASSERT_NE(scheduler, nullptr);
    if (init_scale == 65536.0) {
      EXPECT_TRUE(stepped);
      EXPECT_EQ(scheduler->steps, 1);
      EXPECT_EQ(observer->will_skip_at(TrainingStage::AfterOptimizerStep),
                std::vector<bool>{false});
    } else {
      // 2^40 times O(1) gradients overflow the emulated fp16 backward (max 65504): a real inf.
      EXPECT_FALSE(stepped);
      EXPECT_EQ(scheduler->steps, 0);
      EXPECT_EQ(strategy.grad_scaler()->get_scale(), std::ldexp(1.0, 39)) << "backed off";
      EXPECT_EQ(observer->will_skip_at(TrainingStage::AfterOptimizerStep), std::vector<bool>{true});
      EXPECT_TRUE(otf::testing::bitwise_equal(
          weights, otf::testing::clones(strategy.models().at("main")->parameters())))
          << "parameters bitwise unchanged";
      const otf::TrainingCounters expected{0, 0, 1, 1, 0};
      EXPECT_EQ(strategy.counters(), expected) << "a skipped step consumes the batch only";
    }
  }
}

TEST(MixedPrecisionHookFloat16, RealOverflowSkipsUntilTheScaleFitsThenTrains) {
  otf::GradScalerOptions scaler_options;
  scaler_options.init_scale = std::ldexp(1.0, 40);
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16, scaler_options);
  TrainingStrategyOptions options = linear_options({mp});
  options.num_epochs.reset();
  options.num_steps = 3;
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(4));
  EXPECT_EQ(strategy.counters().step_count, 3);
  EXPECT_GT(strategy.counters().batch_count, 3) << "some batches were skipped first";
  EXPECT_LT(strategy.grad_scaler()->get_scale(), std::ldexp(1.0, 40));
  for (const auto& parameter : strategy.models().at("main")->parameters()) {
    EXPECT_TRUE(torch::isfinite(parameter).all().item<bool>());
  }
}

// ---- The late-veto hazard (docs/design.md §7.6) ------------------------------------------------

struct AccumulatedRun {
  std::vector<torch::Tensor> weights;
  double scale;
  int64_t growth_tracker;
  otf::TrainingCounters counters;
};

AccumulatedRun run_with_accumulation_at(int priority) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategyOptions options = linear_options({mp, accumulation_hook(2, priority)});
  options.num_epochs.reset();
  options.num_steps = 2;
  TrainingStrategy strategy(std::move(options));
  strategy.run(linear_batches(4));
  return {otf::testing::clones(strategy.models().at("main")->parameters()),
          strategy.grad_scaler()->get_scale(), strategy.grad_scaler()->get_growth_tracker(),
          strategy.counters()};
}

TEST(MixedPrecisionHookHazard, AVetoAfterUnscaleIsUndoneSoAccumulationStaysExact) {
  // Accumulating at priority 40 vetoes after MixedPrecisionHook (20) has unscaled. Without the
  // undo the next step would throw "unscale_() has already been called on this optimizer since
  // the last update()" and the accumulated gradients would mix scaled and unscaled terms.
  const AccumulatedRun early = run_with_accumulation_at(10);
  AccumulatedRun late;
  ASSERT_NO_THROW(late = run_with_accumulation_at(40));
  EXPECT_EQ(late.counters, early.counters);
  EXPECT_EQ(late.counters.step_count, 2);
  EXPECT_EQ(late.counters.batch_count, 4);
  EXPECT_TRUE(otf::testing::bitwise_equal(late.weights, early.weights))
      << "the same updates as accumulating before the unscale";
  EXPECT_EQ(late.scale, early.scale);
  EXPECT_EQ(late.growth_tracker, early.growth_tracker);
  EXPECT_EQ(late.growth_tracker, 2) << "only the two executed steps count towards growth";
}

TEST(MixedPrecisionHookHazard, ASpikeSkipStyleVetoLeavesTheScalerReadyForTheNextStep) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  auto skip_first = std::make_shared<ScriptedUpdateHook>(40, "spike_skip");
  skip_first->veto = [](TrainingStage stage, int64_t call_index) {
    return stage == TrainingStage::DoOptimizerStep && call_index == 0;
  };
  TrainingStrategyOptions options = linear_options({mp, skip_first});
  options.num_epochs.reset();
  options.num_steps = 1;
  TrainingStrategy strategy(std::move(options));
  const auto batches = linear_batches(2);
  EXPECT_FALSE(strategy.train_batch(batches[0]));
  EXPECT_EQ(strategy.grad_scaler()->get_growth_tracker(), 0);
  EXPECT_EQ(strategy.grad_scaler()->get_scale(), 65536.0);
  bool stepped = false;
  ASSERT_NO_THROW(stepped = strategy.train_batch(batches[1]));
  EXPECT_TRUE(stepped);
  EXPECT_EQ(strategy.grad_scaler()->get_growth_tracker(), 1);
}

// ---- Lifecycle, inference and checkpoints ------------------------------------------------------

TEST(MixedPrecisionHookLifecycle, ExitKeepsTheScalerAndLeavesAnActiveRegion) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  bool fail = true;
  TrainingStrategyOptions options = linear_options({mp});
  options.training_fn = [&fail](const otf::NamedModels& models, const otf::TrainingBatch& batch) {
    if (fail) throw std::runtime_error("forward failed");
    return otf::testing::linear_training_fn(models, batch);
  };
  TrainingStrategy strategy(std::move(options));
  EXPECT_THROW(strategy.run(linear_batches(1)), std::runtime_error);
  EXPECT_FALSE(mp->autocast_active()) << "the strategy's exit exits the region";
  EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_FALSE(otf::is_cpu_fp16_emulation_enabled());
  ASSERT_NE(mp->grad_scaler(), nullptr) << "kept (unlike the reference) for checkpoints";
  otf::GradScaler* const scaler = mp->grad_scaler();
  fail = false;
  strategy.run(linear_batches(1));
  EXPECT_EQ(mp->grad_scaler(), scaler) << "the same scaler across lifecycles";
  EXPECT_EQ(scaler->get_growth_tracker(), 1);
}

TEST(MixedPrecisionHookLifecycle, InferenceRegionFollowsThePrecisionAndNeverTouchesTheScaler) {
  for (const Precision precision : kAllPrecisions) {
    const MixedPrecisionHook hook(precision);
    {
      const otf::AutocastRegion region = hook.inference_region(c10::Device(c10::kCPU));
      EXPECT_EQ(cpu_autocast_precision(), expected_autocast(precision)) << precision;
    }
    EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(hook.grad_scaler(), nullptr);
  }
}

TEST(MixedPrecisionHookLifecycle, ValidationRunsInTheInferenceRegion) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::BFloat16);
  std::vector<std::optional<Precision>> seen;
  auto probe = std::make_shared<CallbackHook>(
      TrainingStage::BeforeForward,
      [&](TrainContext&, TrainingStage) { seen.push_back(cpu_autocast_precision()); });
  TrainingStrategy strategy(linear_options({mp, probe}));
  const otf::ValidationSummary summary = strategy.validate(linear_batches(2));
  EXPECT_EQ(seen,
            (std::vector<std::optional<Precision>>{Precision::BFloat16, Precision::BFloat16}));
  EXPECT_TRUE(std::isfinite(summary.at("total_loss")));
  EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
}

TEST(MixedPrecisionHookLifecycle, CheckpointsTheGradScalerState) {
  otf::GradScalerOptions scaler_options;
  scaler_options.init_scale = 4096.0;
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16, scaler_options);
  TrainingStrategy strategy(linear_options({mp}));
  strategy.run(linear_batches(3));
  ASSERT_EQ(strategy.checkpointable_hooks(), std::vector<otf::Checkpointable*>{mp.get()});
  torch::serialize::OutputArchive archive;
  mp->save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);

  MixedPrecisionHook restored(Precision::Float16);
  torch::serialize::InputArchive input;
  std::istringstream in(bytes.str());
  input.load_from(in);
  restored.load(input);
  ASSERT_NE(restored.grad_scaler(), nullptr);
  EXPECT_EQ(restored.grad_scaler()->get_scale(), 4096.0);
  EXPECT_EQ(restored.grad_scaler()->get_growth_tracker(), 3);

  // Nothing to save before the scaler exists, and nothing is created from an empty archive.
  MixedPrecisionHook fresh(Precision::Float16);
  torch::serialize::OutputArchive empty_archive;
  fresh.save(empty_archive);
  std::ostringstream empty_bytes;
  empty_archive.save_to(empty_bytes);
  torch::serialize::InputArchive empty_input;
  std::istringstream empty_in(empty_bytes.str());
  empty_input.load_from(empty_in);
  MixedPrecisionHook other(Precision::Float16);
  other.load(empty_input);
  EXPECT_EQ(other.grad_scaler(), nullptr);
}

TEST(MixedPrecisionHookDataParallel, InstallsTheFoundInfReducerOfTheCommunicator) {
  auto mp = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategy strategy(linear_options({mp}));
  auto communicator = std::make_shared<otf::testing::IdenticalRanksCommunicator>(1, 2);
  strategy.set_communicator(communicator);
  strategy.run(linear_batches(2));
  EXPECT_EQ(strategy.counters().step_count, 2);
  EXPECT_EQ(communicator->max_reductions, 2) << "one found-inf reduction per optimizer and step";
  EXPECT_EQ(communicator->tensor_reductions, 2) << "one gradient sum per backward";
  EXPECT_EQ(strategy.counters().global_step_count, 4);
}

}  // namespace

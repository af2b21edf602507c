// The update hooks that shape an optimizer step: GradientAccumulationHook (10), GradientClipHook
// (30) and EmaHook (50), alone and together with MixedPrecisionHook (20), through a real
// TrainingUpdateOrchestrator and a real TrainingStrategy (docs/design.md §4.3, §5 and §7.5;
// modelled on the reference's test_ema_hook.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ema_hook.h"
#include "grad_scaler.h"
#include "gradient_accumulation_hook.h"
#include "gradient_clip_hook.h"
#include "mixed_precision_hook.h"
#include "training_test_support.h"
#include "training_update_orchestrator.h"

namespace {

using otf::EmaHook;
using otf::EmaOptions;
using otf::GradientAccumulationHook;
using otf::GradientClipHook;
using otf::MixedPrecisionHook;
using otf::NamedModels;
using otf::Precision;
using otf::TrainContext;
using otf::TrainingBatch;
using otf::TrainingStage;
using otf::TrainingStrategy;
using otf::TrainingStrategyOptions;
using otf::TrainingUpdateOrchestrator;
using otf::testing::clones;
using otf::testing::error_message;
using otf::testing::linear_batches;
using otf::testing::linear_model;
using otf::testing::linear_options;
using otf::testing::ScriptedUpdateHook;
using otf::testing::StageRecorder;

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

std::vector<torch::Tensor> main_parameters(const TrainingStrategy& strategy) {
  return clones(strategy.models().at("main")->parameters());
}

torch::Tensor main_weight_gradient(const TrainContext& ctx) {
  const torch::Tensor& grad = ctx.models->at("main")->parameters().front().grad();
  return grad.defined() ? grad.detach().clone() : torch::Tensor();
}

// max |actual - expected| <= relative * max |expected|: for float16-emulated runs, whose forward
// rounds to 11 significant bits.
bool relatively_close(const torch::Tensor& actual, const torch::Tensor& expected, double relative) {
  const double error = (actual - expected).abs().max().item<double>();
  return error <= relative * expected.abs().max().item<double>();
}

double total_norm(const std::vector<torch::Tensor>& tensors) {
  double sum_of_squares = 0.0;
  for (const auto& tensor : tensors) sum_of_squares += tensor.pow(2).sum().item<double>();
  return std::sqrt(sum_of_squares);
}

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> gradients;
  for (const auto& parameter : parameters) gradients.push_back(parameter.grad().detach().clone());
  return gradients;
}

TrainingBatch concatenated(const TrainingBatch& first, const TrainingBatch& second) {
  return TrainingBatch({{"x", torch::cat({first.at("x"), second.at("x")})},
                        {"energy", torch::cat({first.at("energy"), second.at("energy")})}});
}

// The float32 gradient of energy_mse_loss(batch) / divisor at `weights`, computed by hand.
torch::Tensor float32_gradient(const std::vector<float>& weights, const TrainingBatch& batch,
                               double divisor) {
  NamedModels models{{"main", linear_model(weights)}};
  const auto predictions = otf::testing::linear_training_fn(models, batch);
  const torch::Tensor loss =
      otf::testing::energy_mse_loss(predictions, batch, 0, 0).total_loss / divisor;
  loss.backward();
  return models.at("main")->parameters().front().grad().detach().clone();
}

TrainingStrategyOptions steps_options(std::vector<otf::HookEntry> hooks, int64_t num_steps) {
  TrainingStrategyOptions options = linear_options(std::move(hooks));
  options.num_epochs.reset();
  options.num_steps = num_steps;
  return options;
}

std::string saved(const otf::Checkpointable& hook) {
  torch::serialize::OutputArchive archive;
  hook.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

void load_into(otf::Checkpointable& hook, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream stream(bytes);
  archive.load_from(stream);
  hook.load(archive);
}

void set_weights(torch::nn::Module& model, const std::vector<float>& weights) {
  torch::NoGradGuard no_grad;
  model.parameters().front().copy_(torch::tensor(weights).reshape({1, -1}));
}

// =================================================================================================
// GradientAccumulationHook
// =================================================================================================

TEST(GradientAccumulationHook, IsThePriorityTenBucketWithAnExclusiveKeyAndRejectsStepsBelowOne) {
  const GradientAccumulationHook hook(4);
  EXPECT_EQ(hook.priority(), 10);
  EXPECT_EQ(hook.exclusive_key(), std::optional<std::string>("GradientAccumulationHook"));
  EXPECT_EQ(hook.steps(), 4);
  EXPECT_EQ(hook.micro_batch_in_group(), 0);
  for (const int64_t steps : {0, -1}) {
    EXPECT_THROW(GradientAccumulationHook{steps}, std::invalid_argument);
  }
  EXPECT_TRUE(contains(error_message([] { GradientAccumulationHook hook(0); }), "got 0"));
  EXPECT_THROW(TrainingUpdateOrchestrator({std::make_shared<GradientAccumulationHook>(2),
                                           std::make_shared<GradientAccumulationHook>(3)}),
               std::invalid_argument);
}

TEST(GradientAccumulationHook, VetoesZeroGradAndStepByPositionAndDividesTheLoss) {
  GradientAccumulationHook hook(3);
  TrainContext ctx;
  std::vector<bool> zeroes, steps;
  for (int micro_batch = 0; micro_batch < 6; ++micro_batch) {
    ctx.loss = torch::tensor(6.0);
    zeroes.push_back(hook.call(ctx, TrainingStage::BeforeBatch, false).proceed);
    const otf::UpdateResult backward = hook.call(ctx, TrainingStage::DoBackward, false);
    EXPECT_EQ(backward.loss.item<double>(), 2.0) << "loss / N";
    steps.push_back(hook.call(ctx, TrainingStage::DoOptimizerStep, false).proceed);
    hook.call(ctx, TrainingStage::AfterOptimizerStep, !steps.back());
  }
  EXPECT_EQ(zeroes, (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_EQ(steps, (std::vector<bool>{false, false, true, false, false, true}));
  EXPECT_EQ(hook.micro_batch_in_group(), 0);
  // Any other stage neither vetoes nor counts.
  EXPECT_TRUE(hook.call(ctx, TrainingStage::Setup, false).proceed);
  EXPECT_TRUE(hook.call(ctx, TrainingStage::AfterBatch, false).proceed);
  EXPECT_EQ(hook.micro_batch_in_group(), 0);
}

TEST(GradientAccumulationHook, OneStepChangesNothing) {
  GradientAccumulationHook hook(1);
  TrainContext ctx;
  ctx.loss = torch::tensor(3.0);
  for (int micro_batch = 0; micro_batch < 3; ++micro_batch) {
    EXPECT_TRUE(hook.call(ctx, TrainingStage::BeforeBatch, false).proceed);
    EXPECT_TRUE(hook.call(ctx, TrainingStage::DoBackward, false).loss.is_same(ctx.loss));
    EXPECT_TRUE(hook.call(ctx, TrainingStage::DoOptimizerStep, false).proceed);
    hook.call(ctx, TrainingStage::AfterOptimizerStep, false);
  }
}

TEST(GradientAccumulationHook, TwoMicroBatchesEqualOneStepOnTheConcatenatedBatch) {
  const std::vector<TrainingBatch> micro_batches = linear_batches(4);
  auto accumulation = std::make_shared<GradientAccumulationHook>(2);
  TrainingStrategy accumulated(steps_options({accumulation}, 2));
  accumulated.run(micro_batches);

  TrainingStrategy concatenated_run(steps_options({}, 2));
  concatenated_run.run({concatenated(micro_batches[0], micro_batches[1]),
                        concatenated(micro_batches[2], micro_batches[3])});

  EXPECT_EQ(accumulated.counters().step_count, 2);
  EXPECT_EQ(accumulated.counters().batch_count, 4);
  const auto expected = main_parameters(concatenated_run);
  const auto actual = main_parameters(accumulated);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_TRUE(torch::allclose(actual[i], expected[i], /*rtol=*/0.0, /*atol=*/1e-6))
        << actual[i] << " vs " << expected[i];
  }
  // The weights did move: the comparison is not between two untouched models.
  EXPECT_FALSE(torch::equal(actual[0], linear_model({0.1f, 0.2f, 0.3f})->parameters()[0]));
}

TEST(GradientAccumulationHook, ZeroesOnlyAtGroupStartsAndStepsOncePerGroup) {
  std::vector<bool> gradient_defined_at_forward;
  std::vector<int64_t> step_count_after_batch;
  std::vector<torch::Tensor> weights_after_batch;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    if (stage == TrainingStage::BeforeForward) {
      gradient_defined_at_forward.push_back(main_weight_gradient(ctx).defined());
    }
    if (stage == TrainingStage::AfterBatch) {
      step_count_after_batch.push_back(ctx.counters.step_count);
      weights_after_batch.push_back(ctx.models->at("main")->parameters().front().detach().clone());
    }
  });
  TrainingStrategy strategy(
      steps_options({recorder, std::make_shared<GradientAccumulationHook>(3)}, 2));
  const auto initial = main_parameters(strategy);
  strategy.run(linear_batches(6));

  // zero_grad(set_to_none) at group starts leaves no gradient; in between they accumulate.
  EXPECT_EQ(gradient_defined_at_forward, (std::vector<bool>{false, true, true, false, true, true}));
  EXPECT_EQ(step_count_after_batch, (std::vector<int64_t>{0, 0, 1, 1, 1, 2}));
  ASSERT_EQ(weights_after_batch.size(), 6u);
  EXPECT_TRUE(torch::equal(weights_after_batch[0], initial[0]));
  EXPECT_TRUE(torch::equal(weights_after_batch[1], initial[0]));
  EXPECT_FALSE(torch::equal(weights_after_batch[2], initial[0]));
  EXPECT_TRUE(torch::equal(weights_after_batch[3], weights_after_batch[2]));
  EXPECT_TRUE(torch::equal(weights_after_batch[4], weights_after_batch[2]));
  EXPECT_FALSE(torch::equal(weights_after_batch[5], weights_after_batch[2]));
  EXPECT_EQ(strategy.counters().batch_count, 6);
}

TEST(GradientAccumulationHook, CheckpointKeepsThePositionInTheGroupAndRejectsAnotherGroupSize) {
  GradientAccumulationHook hook(3);
  TrainContext ctx;
  hook.call(ctx, TrainingStage::AfterOptimizerStep, true);  // one micro-batch of the group done
  const std::string bytes = saved(hook);

  GradientAccumulationHook resumed(3);
  load_into(resumed, bytes);
  EXPECT_EQ(resumed.micro_batch_in_group(), 1);
  EXPECT_FALSE(resumed.call(ctx, TrainingStage::BeforeBatch, false).proceed) << "mid-group";
  EXPECT_FALSE(resumed.call(ctx, TrainingStage::DoOptimizerStep, false).proceed);
  resumed.call(ctx, TrainingStage::AfterOptimizerStep, true);
  EXPECT_TRUE(resumed.call(ctx, TrainingStage::DoOptimizerStep, false).proceed) << "third of 3";

  GradientAccumulationHook other(2);
  const std::string message = error_message([&] { load_into(other, bytes); });
  EXPECT_TRUE(contains(message,
                       "GradientAccumulationHook checkpoint conflict: steps=3 vs "
                       "constructor steps=2"))
      << message;
  EXPECT_EQ(other.micro_batch_in_group(), 0) << "a rejected checkpoint changes nothing";
}

TEST(GradientAccumulationHook, StrategyFindsItAsCheckpointable) {
  auto accumulation = std::make_shared<GradientAccumulationHook>(2);
  auto clip = std::make_shared<GradientClipHook>(1.0);
  auto ema = std::make_shared<EmaHook>();
  TrainingStrategy strategy(linear_options({ema, clip, accumulation}));
  const std::vector<otf::Checkpointable*> checkpointable = strategy.checkpointable_hooks();
  ASSERT_EQ(checkpointable.size(), 2u) << "accumulation and EMA; clipping keeps no state";
  EXPECT_EQ(checkpointable[0], static_cast<otf::Checkpointable*>(accumulation.get()));
  EXPECT_EQ(checkpointable[1], static_cast<otf::Checkpointable*>(ema.get()));
}

// ---- Accumulation under float16 -----------------------------------------------------------------

TEST(GradientAccumulationHookFloat16, GradientsStayScaledUntilTheGroupStepsOnce) {
  // Observed just after MixedPrecisionHook (20) at each update stage.
  struct Observation {
    bool will_skip;
    torch::Tensor gradient;
    double scale;
    int64_t growth_tracker;
  };
  std::vector<Observation> at_step;
  std::vector<std::string> scaler_log;
  auto probe = std::make_shared<ScriptedUpdateHook>(25, "probe");
  probe->on_call = [&](TrainContext& ctx, TrainingStage stage, bool will_skip) {
    if (stage == TrainingStage::BeforeBatch && scaler_log.empty()) {
      // Called by unscale_ for each optimizer: a log of every unscale.
      ctx.grad_scaler->set_found_inf_reducer(
          [&](torch::Tensor&) { scaler_log.push_back("unscale_"); });
      scaler_log.push_back("installed");
    }
    if (stage == TrainingStage::DoOptimizerStep) {
      at_step.push_back({will_skip, main_weight_gradient(ctx), ctx.grad_scaler->get_scale(),
                         ctx.grad_scaler->get_growth_tracker()});
    }
  };
  std::vector<torch::Tensor> weights_after_batch;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    if (stage == TrainingStage::AfterBatch) {
      weights_after_batch.push_back(ctx.models->at("main")->parameters().front().detach().clone());
    }
  });
  auto mixed_precision = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  TrainingStrategy strategy(steps_options(
      {recorder, mixed_precision, probe, std::make_shared<GradientAccumulationHook>(2)}, 1));
  const std::vector<TrainingBatch> batches = linear_batches(2);
  const std::vector<float> initial = {0.1f, 0.2f, 0.3f};
  strategy.run(batches);

  // Float32 control: each micro-batch's gradient of loss / 2 at the initial weights.
  const torch::Tensor first = float32_gradient(initial, batches[0], 2.0);
  const torch::Tensor second = float32_gradient(initial, batches[1], 2.0);
  ASSERT_EQ(at_step.size(), 2u);
  ASSERT_EQ(weights_after_batch.size(), 2u);

  // Micro-batch 1: MixedPrecisionHook saw the veto, so no unscale_, step or update.
  EXPECT_TRUE(at_step[0].will_skip);
  EXPECT_EQ(at_step[0].scale, 65536.0);
  EXPECT_EQ(at_step[0].growth_tracker, 0);
  EXPECT_TRUE(relatively_close(at_step[0].gradient, 65536.0 * first, 1e-2))
      << "still scaled: " << at_step[0].gradient << " vs 65536 * " << first;
  EXPECT_TRUE(torch::equal(weights_after_batch[0], linear_model(initial)->parameters()[0]))
      << "no optimizer step";

  // Micro-batch 2 completes the group: one unscale_ of the scaled sum, one step, one update.
  EXPECT_FALSE(at_step[1].will_skip);
  EXPECT_TRUE(relatively_close(at_step[1].gradient, first + second, 1e-2))
      << "unscaled mean: " << at_step[1].gradient << " vs " << first + second;
  EXPECT_EQ(scaler_log, (std::vector<std::string>{"installed", "unscale_"}));
  EXPECT_EQ(strategy.grad_scaler()->get_growth_tracker(), 1) << "exactly one update()";
  EXPECT_EQ(strategy.grad_scaler()->get_scale(), 65536.0);
  EXPECT_EQ(strategy.counters().step_count, 1);
  EXPECT_EQ(strategy.counters().batch_count, 2);
  const torch::Tensor initial_weights = linear_model(initial)->parameters()[0].detach();
  EXPECT_TRUE(
      relatively_close(weights_after_batch[1] - initial_weights, -0.1 * (first + second), 1e-2))
      << "one SGD step on the mean gradient";
}

// =================================================================================================
// GradientClipHook
// =================================================================================================

// w (two elements) in the first optimizer, v (and w again, unless told otherwise) in the second:
// the gradients (3, 4) and (12) have a total norm of 13 when w is counted once. (Not shared under
// float16: GradScaler unscales per optimizer, so a shared parameter would be unscaled twice, in
// PyTorch as here.)
struct ClipFixture {
  torch::Tensor w = torch::tensor({1.0f, 1.0f}).requires_grad_(true);
  torch::Tensor v = torch::tensor({1.0f}).requires_grad_(true);
  torch::optim::SGD first{std::vector<torch::Tensor>{w}, torch::optim::SGDOptions(0.5)};
  torch::optim::SGD second;
  TrainContext ctx;

  explicit ClipFixture(bool w_in_both_optimizers = true)
      : second(
            w_in_both_optimizers ? std::vector<torch::Tensor>{w, v} : std::vector<torch::Tensor>{v},
            torch::optim::SGDOptions(0.5)) {
    ctx.optimizers = {&first, &second};
  }

  // Zero, backward, step through the orchestrator, as the strategy drives it.
  void train_once(TrainingUpdateOrchestrator& orchestrator,
                  const torch::Tensor& w_coefficients = torch::tensor({3.0f, 4.0f})) {
    orchestrator(ctx, TrainingStage::BeforeBatch);
    ctx.loss = (w * w_coefficients).sum() + (v * 12.0).sum();
    orchestrator(ctx, TrainingStage::DoBackward);
    orchestrator(ctx, TrainingStage::DoOptimizerStep);
    orchestrator(ctx, TrainingStage::AfterOptimizerStep);
  }
  std::vector<torch::Tensor> gradients() const { return gradients_of({w, v}); }
};

TEST(GradientClipHook, IsThePriorityThirtyBucketWithAnExclusiveKeyAndValidatesArguments) {
  const GradientClipHook hook(1.5);
  EXPECT_EQ(hook.priority(), 30);
  EXPECT_EQ(hook.exclusive_key(), std::optional<std::string>("GradientClipHook"));
  EXPECT_EQ(hook.max_norm(), 1.5);
  EXPECT_EQ(hook.norm_type(), 2.0);
  EXPECT_FALSE(hook.last_total_norm().has_value());
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const double bad : {0.0, -1.0, inf, nan}) {
    EXPECT_THROW(GradientClipHook{bad}, std::invalid_argument) << bad;
  }
  for (const double bad : {0.0, -2.0, nan}) {
    EXPECT_THROW(GradientClipHook(1.0, bad), std::invalid_argument) << bad;
  }
  EXPECT_NO_THROW(GradientClipHook(1.0, inf));
  const std::string message = error_message([] {
    TrainingUpdateOrchestrator(
        {std::make_shared<GradientClipHook>(1.0), std::make_shared<GradientClipHook>(2.0)});
  });
  EXPECT_TRUE(contains(message, "exclusive key 'GradientClipHook'")) << message;
}

TEST(GradientClipHook, ClipsALargerTotalNormToMaxNormCountingSharedParametersOnce) {
  ClipFixture fixture;
  auto clip = std::make_shared<GradientClipHook>(1.3);
  TrainingUpdateOrchestrator orchestrator({clip});
  const auto w_before = fixture.w.detach().clone();
  fixture.train_once(orchestrator);
  ASSERT_TRUE(clip->last_total_norm().has_value());
  EXPECT_EQ(*clip->last_total_norm(), 13.0);
  const auto gradients = fixture.gradients();
  EXPECT_NEAR(total_norm(gradients), 1.3, 1.3 * 1e-6);
  // The direction is kept: (3, 4, 12) * 1.3 / 13.
  EXPECT_TRUE(torch::allclose(gradients[0], torch::tensor({0.3f, 0.4f}), 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(gradients[1], torch::tensor({1.2f}), 1e-6, 1e-7));
  // Both optimizers stepped on the clipped gradient of w (lr 0.5 each).
  EXPECT_TRUE(torch::allclose(fixture.w.detach(), w_before - 2 * 0.5 * gradients[0], 1e-6, 1e-7));
}

TEST(GradientClipHook, LeavesASmallerTotalNormBitwiseUnchanged) {
  ClipFixture fixture;
  auto clip = std::make_shared<GradientClipHook>(100.0);
  TrainingUpdateOrchestrator orchestrator({clip});
  fixture.train_once(orchestrator);
  EXPECT_EQ(*clip->last_total_norm(), 13.0);
  const auto gradients = fixture.gradients();
  EXPECT_TRUE(torch::equal(gradients[0], torch::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(gradients[1], torch::tensor({12.0f})));
}

TEST(GradientClipHook, MaxNormOfOrderInfinityClipsTheLargestComponent) {
  ClipFixture fixture;
  auto clip = std::make_shared<GradientClipHook>(6.0, std::numeric_limits<double>::infinity());
  TrainingUpdateOrchestrator orchestrator({clip});
  fixture.train_once(orchestrator);
  EXPECT_EQ(*clip->last_total_norm(), 12.0);
  EXPECT_NEAR(fixture.gradients()[1].item<double>(), 6.0, 1e-5);
}

TEST(GradientClipHook, DoesNothingWhenTheStepWillBeSkipped) {
  ClipFixture fixture;
  auto veto = std::make_shared<ScriptedUpdateHook>(10, "veto");
  veto->veto = [](TrainingStage stage, int64_t) { return stage == TrainingStage::DoOptimizerStep; };
  auto clip = std::make_shared<GradientClipHook>(1.3);
  TrainingUpdateOrchestrator orchestrator({clip, veto});
  const auto w_before = fixture.w.detach().clone();
  fixture.train_once(orchestrator);
  EXPECT_FALSE(clip->last_total_norm().has_value());
  EXPECT_TRUE(torch::equal(fixture.gradients()[0], torch::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(fixture.w.detach(), w_before));
  // Called directly with will_skip, and at the other stages, it does nothing either.
  for (const TrainingStage stage : otf::all_training_stages()) {
    const bool skip = stage == TrainingStage::DoOptimizerStep;
    EXPECT_TRUE(clip->call(fixture.ctx, stage, skip).proceed);
  }
  EXPECT_FALSE(clip->last_total_norm().has_value());
  EXPECT_TRUE(torch::equal(fixture.gradients()[0], torch::tensor({3.0f, 4.0f})));
}

TEST(GradientClipHook, ANonFiniteNormNeitherThrowsNorTouchesTheGradients) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const float bad : {inf, nan}) {
    ClipFixture fixture;
    fixture.w.mutable_grad() = torch::tensor({3.0f, bad});
    fixture.v.mutable_grad() = torch::tensor({12.0f});
    GradientClipHook clip(1.3);
    ASSERT_NO_THROW(clip.call(fixture.ctx, TrainingStage::DoOptimizerStep, false));
    ASSERT_TRUE(clip.last_total_norm().has_value());
    if (std::isnan(bad)) {
      EXPECT_TRUE(std::isnan(*clip.last_total_norm()));
    } else {
      EXPECT_EQ(*clip.last_total_norm(), std::numeric_limits<double>::infinity());
    }
    // PyTorch's clip would multiply everything by 1.3 / inf = 0 (or by NaN). Here w, which holds
    // the inf/NaN, is untouched, and v, all finite, is clipped on its own: 12 -> 1.3.
    EXPECT_EQ(fixture.w.grad()[0].item<float>(), 3.0f);
    EXPECT_NEAR(fixture.v.grad().item<float>(), 1.3, 1e-6);
  }
  // Finite gradients whose norm overflows float32 are left alone too, rather than zeroed.
  ClipFixture huge;
  huge.w.mutable_grad() = torch::tensor({3e38f, 3e38f});
  huge.v.mutable_grad() = torch::tensor({1.0f});
  GradientClipHook clip(1.0);
  ASSERT_NO_THROW(clip.call(huge.ctx, TrainingStage::DoOptimizerStep, false));
  EXPECT_EQ(*clip.last_total_norm(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(huge.v.grad().item<float>(), 1.0f);
}

TEST(GradientClipHookFloat16, AnOverflowingOptimizerIsSkippedAndTheOthersStepClipped) {
  // w overflows in the first optimizer; v, in the second, stays finite.
  ClipFixture fixture(/*w_in_both_optimizers=*/false);
  auto mixed_precision = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  auto clip = std::make_shared<GradientClipHook>(1.3);
  TrainingUpdateOrchestrator orchestrator({clip, mixed_precision});
  const torch::Tensor w_before = fixture.w.detach().clone();
  const float inf = std::numeric_limits<float>::infinity();
  ASSERT_NO_THROW(fixture.train_once(orchestrator, torch::tensor({3.0f, inf})));
  EXPECT_TRUE(orchestrator.optimizer_step_skipped());
  EXPECT_EQ(*clip->last_total_norm(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(mixed_precision->grad_scaler()->get_scale(), 32768.0) << "backed off";
  // The scaler skipped w's optimizer: w bitwise unchanged, its finite component unscaled
  // (3 * 65536 / 65536), neither zeroed nor NaN.
  EXPECT_TRUE(torch::equal(fixture.w.detach(), w_before));
  EXPECT_EQ(fixture.w.grad()[0].item<float>(), 3.0f);
  // It stepped v's optimizer (docs/design.md §5.5), on v's gradient clipped to max_norm.
  EXPECT_NEAR(fixture.v.grad().item<float>(), 1.3, 1e-6);
  EXPECT_NEAR(fixture.v.item<float>(), 1.0 - 0.5 * 1.3, 1e-6);

  // The next, finite step clips as usual.
  fixture.train_once(orchestrator);
  EXPECT_FALSE(orchestrator.optimizer_step_skipped());
  EXPECT_EQ(*clip->last_total_norm(), 13.0) << "unscaled: 3, 4 and 12 exactly";
  EXPECT_NEAR(total_norm(fixture.gradients()), 1.3, 1e-5);
}

// Well below the O(0.01-0.1) gradient norm of the linear test model, so that every run clips.
constexpr double kMaxNorm = 1e-3;

TEST(GradientClipHookFloat16, ClipsTheUnscaledGradientsLikeAFloat32Run) {
  struct Run {
    double total_norm_seen;
    double clipped_norm;
    std::vector<torch::Tensor> weights;
  };
  auto run = [](Precision precision) {
    auto clip = std::make_shared<GradientClipHook>(kMaxNorm);
    double clipped_norm = -1.0;
    auto probe = std::make_shared<ScriptedUpdateHook>(40, "after_clip");
    probe->on_call = [&](TrainContext& ctx, TrainingStage stage, bool will_skip) {
      if (stage == TrainingStage::DoOptimizerStep && !will_skip) {
        clipped_norm = total_norm({main_weight_gradient(ctx)});
      }
    };
    // float32: the hook creates no autocast region and no scaler (a plain float32 run).
    auto mixed_precision = std::make_shared<MixedPrecisionHook>(precision);
    TrainingStrategy strategy(steps_options({clip, probe, mixed_precision}, 1));
    strategy.run(linear_batches(1));
    EXPECT_EQ(strategy.counters().step_count, 1);
    return Run{*clip->last_total_norm(), clipped_norm, main_parameters(strategy)};
  };
  const Run control = run(Precision::Float32);
  const Run half = run(Precision::Float16);
  EXPECT_GT(control.total_norm_seen, 10 * kMaxNorm);
  // The clip saw the unscaled gradient: the float32 norm up to float16 rounding, not 65536 times.
  EXPECT_NEAR(half.total_norm_seen, control.total_norm_seen, 1e-2 * control.total_norm_seen);
  // max_norm * n / (n + 1e-6): PyTorch's epsilon shows at 1e-6 / n relative.
  EXPECT_NEAR(control.clipped_norm, kMaxNorm, 1e-4 * kMaxNorm);
  EXPECT_NEAR(half.clipped_norm, kMaxNorm, 1e-4 * kMaxNorm);
  const torch::Tensor initial = linear_model({0.1f, 0.2f, 0.3f})->parameters()[0].detach();
  EXPECT_TRUE(relatively_close(half.weights[0] - initial, control.weights[0] - initial, 1e-2))
      << "the same clipped update";
}

// =================================================================================================
// EmaHook
// =================================================================================================

EmaOptions ema_options(double decay, int64_t update_every = 1, int64_t start_step = 0) {
  EmaOptions options;
  options.decay = decay;
  options.update_every = update_every;
  options.start_step = start_step;
  return options;
}

// A model, its map, and a context as the strategy would build it.
struct EmaFixture {
  std::shared_ptr<otf::testing::LinearModel> model = linear_model({0.1f, 0.2f, 0.3f});
  NamedModels models{{"main", model}};
  TrainContext ctx;

  EmaFixture() { ctx.models = &models; }
  // One executed optimizer step that left the weights at `weights`; step_count is pre-increment.
  void step_to(EmaHook& hook, const std::vector<float>& weights, int64_t step_count,
               bool skipped = false) {
    set_weights(*model, weights);
    ctx.counters.step_count = step_count;
    hook.call(ctx, TrainingStage::AfterOptimizerStep, skipped);
  }
  const torch::Tensor& averaged_weight(const EmaHook& hook) const {
    return hook.averaged_parameters()["linear.weight"];
  }
};

torch::Tensor row(const std::vector<float>& values) {
  return torch::tensor(values).reshape({1, -1});
}

TEST(EmaHook, DefaultsAreTheReferencesAndOptionsAreValidated) {
  const EmaHook hook;
  EXPECT_EQ(hook.priority(), 50);
  EXPECT_FALSE(hook.exclusive_key().has_value()) << "one EMA per model is allowed";
  EXPECT_EQ(hook.options().model_key, "main");
  EXPECT_EQ(hook.options().decay, 0.999);
  EXPECT_EQ(hook.options().update_every, 1);
  EXPECT_EQ(hook.options().start_step, 0);
  EXPECT_TRUE(hook.options().use_buffers);
  EXPECT_EQ(hook.num_updates(), 0);
  EXPECT_FALSE(hook.initialized());
  EXPECT_THROW(hook.averaged_parameters(), std::runtime_error);

  for (const double bad : {1.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THROW(EmaHook{ema_options(bad)}, std::invalid_argument) << bad;
  }
  EXPECT_NO_THROW(EmaHook{ema_options(0.0)});
  EXPECT_THROW(EmaHook{ema_options(0.5, 0)}, std::invalid_argument);
  EXPECT_THROW(EmaHook{ema_options(0.5, 1, -1)}, std::invalid_argument);
  EmaOptions blank;
  blank.model_key = "  ";
  EXPECT_THROW(EmaHook{blank}, std::invalid_argument);
  EmaOptions padded;
  padded.model_key = " aux ";
  EXPECT_EQ(EmaHook(padded).options().model_key, "aux");
}

TEST(EmaHook, SetupBuildsAnIndependentCopyWithoutUpdating) {
  EmaFixture fixture;
  EmaHook hook(ema_options(0.5));
  hook.call(fixture.ctx, TrainingStage::Setup, false);
  ASSERT_TRUE(hook.initialized());
  EXPECT_EQ(hook.num_updates(), 0);
  const torch::Tensor& averaged = fixture.averaged_weight(hook);
  EXPECT_TRUE(torch::equal(averaged, row({0.1f, 0.2f, 0.3f})));
  EXPECT_NE(averaged.data_ptr(), fixture.model->linear->weight.data_ptr()) << "no shared storage";
  EXPECT_FALSE(averaged.requires_grad());
  // SETUP fires on every run() and train_batch(): a second one keeps the copy.
  set_weights(*fixture.model, {9.0f, 9.0f, 9.0f});
  hook.call(fixture.ctx, TrainingStage::Setup, false);
  EXPECT_TRUE(torch::equal(fixture.averaged_weight(hook), row({0.1f, 0.2f, 0.3f})));
  // No stage but AFTER_OPTIMIZER_STEP updates.
  for (const TrainingStage stage : otf::all_training_stages()) {
    if (stage == TrainingStage::AfterOptimizerStep) continue;
    EXPECT_TRUE(hook.call(fixture.ctx, stage, false).proceed);
  }
  EXPECT_EQ(hook.num_updates(), 0);
}

TEST(EmaHook, ThreeUpdatesWithDecayOneHalfGiveTheValuesComputedByHand) {
  EmaFixture fixture;
  EmaHook hook(ema_options(0.5));
  hook.call(fixture.ctx, TrainingStage::Setup, false);
  // AveragedModel: the first update copies (n_averaged == 0)...
  fixture.step_to(hook, {1.0f, 2.0f, 3.0f}, 0);
  EXPECT_TRUE(torch::equal(fixture.averaged_weight(hook), row({1.0f, 2.0f, 3.0f})));
  // ...then 0.5 * averaged + 0.5 * current.
  fixture.step_to(hook, {3.0f, 4.0f, 5.0f}, 1);
  EXPECT_TRUE(torch::equal(fixture.averaged_weight(hook), row({2.0f, 3.0f, 4.0f})));
  fixture.step_to(hook, {5.0f, 6.0f, 7.0f}, 2);
  EXPECT_TRUE(torch::equal(fixture.averaged_weight(hook), row({3.5f, 4.5f, 5.5f})));
  EXPECT_EQ(hook.num_updates(), 3);
  // The source model is untouched by the averaging.
  EXPECT_TRUE(torch::equal(fixture.model->linear->weight.detach(), row({5.0f, 6.0f, 7.0f})));
}

TEST(EmaHook, DecayZeroTracksTheModel) {
  EmaFixture fixture;
  EmaHook hook(ema_options(0.0));
  fixture.step_to(hook, {1.0f, 2.0f, 3.0f}, 0);  // builds lazily without SETUP
  fixture.step_to(hook, {4.0f, 5.0f, 6.0f}, 1);
  EXPECT_TRUE(torch::equal(fixture.averaged_weight(hook), row({4.0f, 5.0f, 6.0f})));
}

TEST(EmaHook, UpdateEveryIsAGlobalModuloAndStartStepDelaysTheFirstUpdate) {
  EmaFixture fixture;
  EmaHook gated(ema_options(0.0, /*update_every=*/3, /*start_step=*/5));
  std::vector<int64_t> updated_after_completed;
  for (int64_t step_count = 0; step_count < 10; ++step_count) {
    const int64_t before = gated.num_updates();
    fixture.step_to(gated, {float(step_count), 0.0f, 0.0f}, step_count);
    if (gated.num_updates() > before) updated_after_completed.push_back(step_count + 1);
  }
  // Completed steps 6 and 9: multiples of 3 from 5 on (not 5, 8: the modulo is global).
  EXPECT_EQ(updated_after_completed, (std::vector<int64_t>{6, 9}));
  EXPECT_TRUE(torch::equal(fixture.averaged_weight(gated), row({8.0f, 0.0f, 0.0f})));

  EmaHook delayed(ema_options(0.0, 1, /*start_step=*/3));
  for (int64_t step_count = 0; step_count < 2; ++step_count) {
    fixture.step_to(delayed, {1.0f, 1.0f, 1.0f}, step_count);
  }
  EXPECT_EQ(delayed.num_updates(), 0);
  EXPECT_FALSE(delayed.initialized()) << "not even built before the first due update";
  fixture.step_to(delayed, {1.0f, 1.0f, 1.0f}, 2);
  EXPECT_EQ(delayed.num_updates(), 1);
}

TEST(EmaHook, ASkippedStepNeitherUpdatesNorInitializes) {
  EmaFixture fixture;
  EmaHook hook(ema_options(0.5));
  fixture.step_to(hook, {1.0f, 2.0f, 3.0f}, 0, /*skipped=*/true);
  EXPECT_FALSE(hook.initialized());
  EXPECT_EQ(hook.num_updates(), 0);
}

TEST(EmaHook, FollowsOnlyTheExecutedStepsOfAnAccumulatingStrategy) {
  std::vector<torch::Tensor> weights_after_step;
  auto recorder = std::make_shared<StageRecorder>([&](TrainContext& ctx, TrainingStage stage) {
    if (stage == TrainingStage::AfterBatch && ctx.counters.batch_count % 2 == 0) {
      weights_after_step.push_back(ctx.models->at("main")->parameters().front().detach().clone());
    }
  });
  auto ema = std::make_shared<EmaHook>(ema_options(0.5));
  TrainingStrategy strategy(
      steps_options({recorder, ema, std::make_shared<GradientAccumulationHook>(2)}, 3));
  strategy.run(linear_batches(6));
  ASSERT_EQ(weights_after_step.size(), 3u);
  EXPECT_EQ(strategy.counters().step_count, 3);
  EXPECT_EQ(ema->num_updates(), 3) << "three executed steps out of six batches";
  // By hand: e1 = w1, e2 = (e1 + w2) / 2, e3 = (e2 + w3) / 2.
  const torch::Tensor e1 = weights_after_step[0];
  const torch::Tensor e2 = 0.5 * e1 + 0.5 * weights_after_step[1];
  const torch::Tensor e3 = 0.5 * e2 + 0.5 * weights_after_step[2];
  EXPECT_TRUE(torch::allclose(ema->averaged_parameters()["linear.weight"], e3, 0.0, 1e-7))
      << ema->averaged_parameters()["linear.weight"] << " vs " << e3;
}

TEST(EmaHook, AVetoedFirstStepIsNotAveraged) {
  // The reference's strategy integration: first step vetoed, num_steps 1, two batches.
  auto veto_first = std::make_shared<ScriptedUpdateHook>(10, "veto_first");
  veto_first->veto = [](TrainingStage stage, int64_t call_index) {
    return stage == TrainingStage::DoOptimizerStep && call_index == 0;
  };
  auto ema = std::make_shared<EmaHook>(ema_options(0.5));
  TrainingStrategy strategy(steps_options({veto_first, ema}, 1));
  strategy.run(linear_batches(2));
  EXPECT_EQ(strategy.counters().batch_count, 2);
  EXPECT_EQ(strategy.counters().step_count, 1);
  EXPECT_EQ(ema->num_updates(), 1);
  EXPECT_TRUE(torch::equal(ema->averaged_parameters()["linear.weight"],
                           strategy.models().at("main")->parameters()[0].detach()))
      << "the single update copies the model";
}

TEST(EmaHook, AnUnknownModelKeyListsTheAvailableModels) {
  EmaFixture fixture;
  EmaOptions options;
  options.model_key = "missing";
  EmaHook hook(options);
  EXPECT_THROW(hook.call(fixture.ctx, TrainingStage::Setup, false), std::out_of_range);
  const std::string message =
      error_message([&] { hook.call(fixture.ctx, TrainingStage::Setup, false); });
  EXPECT_TRUE(contains(message, "'missing'")) << message;
  EXPECT_TRUE(contains(message, "['main']")) << message;
  // Two hooks on two models are independent.
  auto aux = linear_model({1.0f, 1.0f, 1.0f});
  fixture.models["aux"] = aux;
  EmaOptions aux_options = ema_options(0.0);
  aux_options.model_key = "aux";
  EmaHook main_hook(ema_options(0.0));
  EmaHook aux_hook(aux_options);
  main_hook.call(fixture.ctx, TrainingStage::AfterOptimizerStep, false);
  aux_hook.call(fixture.ctx, TrainingStage::AfterOptimizerStep, false);
  EXPECT_TRUE(
      torch::equal(main_hook.averaged_parameters()["linear.weight"], row({0.1f, 0.2f, 0.3f})));
  EXPECT_TRUE(
      torch::equal(aux_hook.averaged_parameters()["linear.weight"], row({1.0f, 1.0f, 1.0f})));
}

// A model with a float buffer and an integer one, as a normalisation layer keeps.
struct BufferedModel : torch::nn::Module {
  BufferedModel() {
    weight = register_parameter("weight", torch::zeros({2}));
    running_mean = register_buffer("running_mean", torch::zeros({2}));
    batches_seen = register_buffer("batches_seen", torch::zeros({}, torch::kInt64));
  }
  torch::Tensor weight, running_mean, batches_seen;
};

TEST(EmaHook, BuffersAreAveragedOrKeptInSyncWithUseBuffers) {
  for (const bool use_buffers : {true, false}) {
    auto model = std::make_shared<BufferedModel>();
    NamedModels models{{"main", model}};
    TrainContext ctx;
    ctx.models = &models;
    EmaOptions options = ema_options(0.5);
    options.use_buffers = use_buffers;
    EmaHook hook(options);
    for (int step = 0; step < 2; ++step) {
      torch::NoGradGuard no_grad;
      model->weight.fill_(2.0f * step + 2.0f);        // 2, then 4
      model->running_mean.fill_(4.0f * step + 4.0f);  // 4, then 8
      model->batches_seen.fill_(10 * step + 10);      // 10, then 20
      ctx.counters.step_count = step;
      hook.call(ctx, TrainingStage::AfterOptimizerStep, false);
    }
    EXPECT_TRUE(torch::equal(hook.averaged_parameters()["weight"], torch::full({2}, 3.0f)));
    if (use_buffers) {
      EXPECT_TRUE(torch::equal(hook.averaged_buffers()["running_mean"], torch::full({2}, 6.0f)));
      // Integers as PyTorch's get_ema_multi_avg_fn: 10 * 0.5 + 20 * 0.5, copied back.
      EXPECT_EQ(hook.averaged_buffers()["batches_seen"].item<int64_t>(), 15);
      EXPECT_EQ(hook.averaged_buffers()["batches_seen"].scalar_type(), torch::kInt64);
    } else {
      EXPECT_TRUE(torch::equal(hook.averaged_buffers()["running_mean"], torch::full({2}, 8.0f)));
      EXPECT_EQ(hook.averaged_buffers()["batches_seen"].item<int64_t>(), 20);
    }
    // Loading the averages into a second instance, e.g. for validation.
    BufferedModel copy;
    hook.copy_averaged_to(copy);
    EXPECT_TRUE(torch::equal(copy.weight.detach(), torch::full({2}, 3.0f)));
    EXPECT_TRUE(torch::equal(copy.running_mean, hook.averaged_buffers()["running_mean"]));
    EXPECT_THROW(hook.copy_averaged_to(*linear_model({1.0f, 2.0f, 3.0f})), std::invalid_argument);
  }
}

// ---- EMA checkpoints ----------------------------------------------------------------------------

// An EMA hook with non-trivial averages: three random steps at decay 0.9.
struct TrainedEma {
  EmaFixture fixture;
  EmaHook hook{ema_options(0.9)};
  TrainedEma() {
    torch::manual_seed(7);
    for (int64_t step = 0; step < 3; ++step) {
      const torch::Tensor weights = torch::randn({3});
      fixture.step_to(
          hook, {weights[0].item<float>(), weights[1].item<float>(), weights[2].item<float>()},
          step);
    }
  }
};

TEST(EmaHookCheckpoint, RoundTripIsBitwiseAndAppliedBeforeTheFirstUpdate) {
  TrainedEma trained;
  const std::string bytes = saved(trained.hook);
  const torch::Tensor expected = trained.fixture.averaged_weight(trained.hook).clone();

  // Loaded before the copy exists: kept, saved again as loaded, applied at SETUP.
  EmaHook resumed(ema_options(0.9));
  load_into(resumed, bytes);
  EXPECT_EQ(resumed.num_updates(), 3);
  EXPECT_FALSE(resumed.initialized());
  EmaHook resaved(ema_options(0.9));
  load_into(resaved, saved(resumed));
  EmaFixture other;  // a model with other weights
  set_weights(*other.model, {-5.0f, 5.0f, 0.5f});
  resumed.call(other.ctx, TrainingStage::Setup, false);
  resaved.call(other.ctx, TrainingStage::Setup, false);
  EXPECT_TRUE(torch::equal(other.averaged_weight(resumed), expected));
  EXPECT_TRUE(torch::equal(other.averaged_weight(resaved), expected));

  // The next update averages (n_averaged was restored, so it does not copy) exactly as the
  // uninterrupted hook does.
  trained.fixture.step_to(trained.hook, {0.25f, 0.5f, 0.75f}, 3);
  other.step_to(resumed, {0.25f, 0.5f, 0.75f}, 3);
  EXPECT_TRUE(
      torch::equal(other.averaged_weight(resumed), trained.fixture.averaged_weight(trained.hook)));
  EXPECT_EQ(resumed.num_updates(), 4);
}

TEST(EmaHookCheckpoint, LoadingIntoALiveCopyOverwritesIt) {
  TrainedEma trained;
  EmaFixture other;
  EmaHook live(ema_options(0.9));
  live.call(other.ctx, TrainingStage::Setup, false);
  load_into(live, saved(trained.hook));
  EXPECT_TRUE(
      torch::equal(other.averaged_weight(live), trained.fixture.averaged_weight(trained.hook)));
  EXPECT_EQ(live.num_updates(), 3);
}

TEST(EmaHookCheckpoint, ACheckpointWithoutAveragesClearsThem) {
  EmaHook never_initialized(ema_options(0.9));
  TrainedEma trained;
  load_into(trained.hook, saved(never_initialized));
  EXPECT_FALSE(trained.hook.initialized());
  EXPECT_EQ(trained.hook.num_updates(), 0);
  // The next SETUP rebuilds from the model.
  trained.hook.call(trained.fixture.ctx, TrainingStage::Setup, false);
  EXPECT_TRUE(torch::equal(trained.fixture.averaged_weight(trained.hook),
                           trained.fixture.model->linear->weight.detach()));
}

TEST(EmaHookCheckpoint, AConfigConflictIsRejectedAndChangesNothing) {
  TrainedEma trained;
  EmaHook other(EmaOptions{});  // decay 0.999
  const std::string message = error_message([&] { load_into(other, saved(trained.hook)); });
  EXPECT_EQ(message.rfind("EmaHook checkpoint conflict: decay=0.9 vs constructor decay=0.999", 0),
            0u)
      << message;
  EXPECT_TRUE(contains(message, "construct the hook with matching config")) << message;
  EXPECT_EQ(other.num_updates(), 0);
  EXPECT_FALSE(other.initialized());
  EXPECT_THROW(load_into(other, saved(trained.hook)), std::invalid_argument);

  EmaHook every_other(ema_options(0.9, 2));
  EXPECT_TRUE(contains(error_message([&] { load_into(every_other, saved(trained.hook)); }),
                       "update_every=1 vs constructor update_every=2"));
}

TEST(EmaHookCheckpoint, AShapeMismatchIsReportedWhenTheCopyIsBuilt) {
  TrainedEma trained;
  EmaHook resumed(ema_options(0.9));
  load_into(resumed, saved(trained.hook));
  auto wider = linear_model({1.0f, 2.0f, 3.0f, 4.0f});
  NamedModels models{{"main", wider}};
  TrainContext ctx;
  ctx.models = &models;
  const std::string message =
      error_message([&] { resumed.call(ctx, TrainingStage::Setup, false); });
  EXPECT_TRUE(contains(message, "'linear.weight' has shape [1, 3]")) << message;
  EXPECT_FALSE(resumed.initialized());

  // A model swapped for another architecture after the copy was built is refused, not averaged.
  EmaFixture fixture;
  EmaHook live(ema_options(0.5));
  live.call(fixture.ctx, TrainingStage::Setup, false);
  fixture.models["main"] = wider;
  EXPECT_THROW(live.call(fixture.ctx, TrainingStage::Setup, false), std::invalid_argument);
  EXPECT_THROW(live.call(fixture.ctx, TrainingStage::AfterOptimizerStep, false),
               std::invalid_argument);
  EXPECT_EQ(live.num_updates(), 0);
}

// =================================================================================================
// All four together
// =================================================================================================

TEST(UpdateHooksTogether, AccumulationMixedPrecisionClippingAndEmaTrainCleanly) {
  auto accumulation = std::make_shared<GradientAccumulationHook>(2);
  auto mixed_precision = std::make_shared<MixedPrecisionHook>(Precision::Float16);
  auto clip = std::make_shared<GradientClipHook>(0.01);
  auto ema = std::make_shared<EmaHook>(ema_options(0.5));
  TrainingStrategy strategy(steps_options({ema, clip, mixed_precision, accumulation}, 2));
  std::vector<int> priorities;
  for (const auto& hook : strategy.update_orchestrator()->hooks()) {
    priorities.push_back(hook->priority());
  }
  EXPECT_EQ(priorities, (std::vector<int>{10, 20, 30, 50}));
  strategy.run(linear_batches(4));
  EXPECT_EQ(strategy.counters().step_count, 2);
  EXPECT_EQ(strategy.counters().batch_count, 4);
  EXPECT_EQ(strategy.grad_scaler()->get_growth_tracker(), 2) << "one update() per group";
  EXPECT_EQ(ema->num_updates(), 2);
  ASSERT_TRUE(clip->last_total_norm().has_value());
  EXPECT_LT(*clip->last_total_norm(), 1.0) << "an unscaled mean-gradient norm";
  for (const auto& parameter : strategy.models().at("main")->parameters()) {
    EXPECT_TRUE(torch::isfinite(parameter).all().item<bool>());
  }
}

}  // namespace

// The whole training state survives a checkpoint: N steps + save + load into a fresh strategy + N
// steps equals 2N uninterrupted steps bitwise (weights, Adam moments, cosine schedule, counters,
// the CPU random generator, and the float16 GradScaler's scale and growth tracker). Damaged,
// foreign, newer and mismatched files are refused with a message naming the problem. A state saved
// before the first batch (no optimizer built yet) loads, and one saved part-way through a
// gradient-accumulation group continues it bitwise.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "grad_scaler.h"
#include "gradient_accumulation_hook.h"
#include "lr_schedules.h"
#include "mixed_precision_hook.h"
#include "optimizer_factory.h"
#include "training_checkpoint.h"
#include "training_strategy.h"

namespace {

using namespace otf;

struct EnergyNetwork : torch::nn::Module {
  EnergyNetwork() {
    layers = register_module("layers", torch::nn::Sequential(
        torch::nn::Linear(3, 16), torch::nn::SiLU(), torch::nn::Linear(16, 1)));
  }
  torch::nn::Sequential layers{nullptr};
};

// Energies of jittered positions and forces by autograd: the jitter draws from the CPU random
// generator, so an exact resume needs the generator's state too.
Predictions force_training_fn(const NamedModels& models, const TrainingBatch& batch) {
  auto& network = *models.at("main")->as<EnergyNetwork>();
  const auto positions =
      (batch.at("positions") + 1e-3 * torch::randn_like(batch.at("positions"))).requires_grad_();
  const auto energy = network.layers->forward(positions).to(torch::kFloat64).sum();
  const auto forces = -torch::autograd::grad({energy}, {positions}, {}, true, true)[0];
  return {{"energy", energy.reshape({1})}, {"forces", forces}};
}

LossOutput force_loss(const Predictions& predictions, const TrainingBatch& batch, int64_t,
                      int64_t) {
  LossOutput out;
  out.total_loss = torch::mse_loss(predictions.at("forces").to(torch::kFloat32),
                                   batch.at("forces"));
  out.per_component_unweighted["forces"] = out.total_loss;
  out.per_component_weight["forces"] = 1.0;
  return out;
}

std::vector<TrainingBatch> make_batches() {
  torch::manual_seed(11);
  std::vector<TrainingBatch> batches;
  for (int i = 0; i < 5; ++i) {
    const auto positions = torch::randn({32, 3});
    batches.emplace_back(std::map<std::string, torch::Tensor>{
        {"positions", positions}, {"forces", -2.0 * positions}});
  }
  return batches;
}

std::unique_ptr<TrainingStrategy> make_strategy(uint64_t init_seed, bool with_schedule = true,
                                                int64_t accumulate = 1) {
  torch::manual_seed(init_seed);
  TrainingStrategyOptions options;
  options.models["main"] = std::make_shared<EnergyNetwork>();
  options.training_fn = force_training_fn;
  options.loss_fn = force_loss;
  OptimizerConfig config;
  config.make_optimizer = [](std::vector<torch::Tensor> parameters) {
    OptimizerSettings settings;
    settings.learning_rate = 1e-2;
    return make_optimizer(OptimizerKind::Adam, std::move(parameters), settings);
  };
  if (with_schedule) {
    config.make_scheduler = [](torch::optim::Optimizer& optimizer) {
      LRScheduleSettings settings;
      settings.t_max = 12;
      return make_lr_scheduler(LRScheduleKind::Cosine, optimizer, settings);
    };
  }
  options.optimizer_configs = {config};
  GradScalerOptions scaler_options;
  scaler_options.init_scale = std::ldexp(1.0, 24);  // overflows at first: skips are part of the run
  scaler_options.growth_interval = 3;               // and so is growth
  options.hooks = {std::make_shared<MixedPrecisionHook>(Precision::Float16, scaler_options)};
  if (accumulate > 1)
    options.hooks.push_back(std::make_shared<GradientAccumulationHook>(accumulate));
  return std::make_unique<TrainingStrategy>(std::move(options));
}

std::vector<torch::Tensor> parameters_of(TrainingStrategy& strategy) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : strategy.models().at("main")->parameters()) copies.push_back(p.clone());
  return copies;
}

std::string scratch_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("otf-checkpoint-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

TEST(TrainingCheckpoint, ResumedRunContinuesBitwiseLikeAnUninterruptedOne) {
  const auto batches = make_batches();
  constexpr int kHalf = 12;

  auto uninterrupted = make_strategy(1);
  torch::manual_seed(99);
  for (int i = 0; i < 2 * kHalf; ++i) uninterrupted->train_batch(batches[i % batches.size()]);

  auto first = make_strategy(1);
  torch::manual_seed(99);
  for (int i = 0; i < kHalf; ++i) first->train_batch(batches[i % batches.size()]);
  const std::string path = scratch_file("resume.pt");
  save_training_checkpoint(*first, path);
  const double scale_at_save = first->grad_scaler()->get_scale();
  first.reset();

  // A different initialisation and a disturbed generator: everything must come from the file.
  auto resumed = make_strategy(2);
  torch::manual_seed(12345);
  load_training_checkpoint(*resumed, path);
  ASSERT_NE(resumed->grad_scaler(), nullptr) << "the GradScaler must be restored, not recreated";
  EXPECT_EQ(resumed->grad_scaler()->get_scale(), scale_at_save);
  for (int i = kHalf; i < 2 * kHalf; ++i) resumed->train_batch(batches[i % batches.size()]);

  EXPECT_EQ(resumed->counters(), uninterrupted->counters());
  EXPECT_LT(uninterrupted->counters().step_count, 2 * kHalf) << "the run should include skips";
  EXPECT_GT(uninterrupted->counters().step_count, 0);
  const auto expected = parameters_of(*uninterrupted);
  const auto actual = parameters_of(*resumed);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(torch::equal(expected[i], actual[i]));
  EXPECT_EQ(resumed->grad_scaler()->get_scale(), uninterrupted->grad_scaler()->get_scale());
  EXPECT_EQ(resumed->grad_scaler()->get_growth_tracker(),
            uninterrupted->grad_scaler()->get_growth_tracker());
  EXPECT_EQ(resumed->lr_schedulers()[0]->current_lr(),
            uninterrupted->lr_schedulers()[0]->current_lr());
  std::filesystem::remove(path);
}

// Trains `first` batches, saves the state, loads it into a fresh strategy (another
// initialisation, another generator state) and trains the rest: returns whether the weights equal
// an uninterrupted run's of `total` batches.
bool resumes_bitwise(int first, int total, int64_t accumulate) {
  const auto batches = make_batches();
  auto uninterrupted = make_strategy(1, true, accumulate);
  torch::manual_seed(99);
  for (int i = 0; i < total; ++i) uninterrupted->train_batch(batches[i % batches.size()]);
  auto before = make_strategy(1, true, accumulate);
  torch::manual_seed(99);
  for (int i = 0; i < first; ++i) before->train_batch(batches[i % batches.size()]);
  const std::string state = save_training_state(*before);
  before.reset();
  auto resumed = make_strategy(2, true, accumulate);
  torch::manual_seed(12345);
  load_training_state(*resumed, state);
  for (int i = first; i < total; ++i) resumed->train_batch(batches[i % batches.size()]);
  EXPECT_GT(uninterrupted->counters().step_count, 0);
  EXPECT_EQ(resumed->counters(), uninterrupted->counters());
  const auto expected = parameters_of(*uninterrupted), actual = parameters_of(*resumed);
  bool equal = expected.size() == actual.size();
  for (size_t i = 0; equal && i < expected.size(); ++i)
    equal = torch::equal(expected[i], actual[i]);
  return equal;
}

TEST(TrainingCheckpoint, StateSavedBeforeTheFirstBatchLoads) {
  // No optimizer is built before the first batch (a restart in fix otf/train's statistics phase).
  EXPECT_TRUE(resumes_bitwise(0, 9, 1));
}

TEST(TrainingCheckpoint, StateSavedPartWayThroughAnAccumulationGroupContinuesIt) {
  // 19 batches in groups of 3: the partial gradient sum of the seventh group is in the state
  // (the GradScaler's large initial scale skips the first groups' steps).
  EXPECT_TRUE(resumes_bitwise(19, 45, 3));
}

TEST(TrainingCheckpoint, WithoutTheGeneratorStateTheRunWouldDiverge) {
  // Control for the test above: the jitter really depends on the generator.
  const auto batches = make_batches();
  auto a = make_strategy(1);
  torch::manual_seed(1);
  for (int i = 0; i < 12; ++i) a->train_batch(batches[i % batches.size()]);
  auto b = make_strategy(1);
  torch::manual_seed(2);
  for (int i = 0; i < 12; ++i) b->train_batch(batches[i % batches.size()]);
  ASSERT_GT(a->counters().step_count, 0);
  bool all_equal = true;
  const auto pa = parameters_of(*a), pb = parameters_of(*b);
  for (size_t i = 0; i < pa.size(); ++i) all_equal = all_equal && torch::equal(pa[i], pb[i]);
  EXPECT_FALSE(all_equal);
}

TEST(TrainingCheckpoint, WriteIsAtomicAndLeavesNoTemporaryFile) {
  const auto batches = make_batches();
  auto strategy = make_strategy(1);
  strategy->train_batch(batches[0]);
  const std::string path = scratch_file("atomic.pt");
  save_training_checkpoint(*strategy, path);
  const auto folder = std::filesystem::path(path).parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos) << entry.path();
  EXPECT_GT(std::filesystem::file_size(path), 0u);
  // A save into a folder that does not exist fails with the file named, nothing half-written.
  try {
    save_training_checkpoint(*strategy, "/nonexistent-folder/x.pt");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent-folder/x.pt"), std::string::npos);
  }
  std::filesystem::remove(path);
}

std::string error_loading(TrainingStrategy& strategy, const std::string& path) {
  try {
    load_training_checkpoint(strategy, path);
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

TEST(TrainingCheckpoint, DamagedForeignAndMismatchedFilesAreRefusedWithTheReason) {
  const auto batches = make_batches();
  auto strategy = make_strategy(1);
  strategy->train_batch(batches[0]);
  const std::string good = scratch_file("good.pt");
  save_training_checkpoint(*strategy, good);

  const std::string truncated = scratch_file("truncated.pt");
  {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const std::string foreign = scratch_file("foreign.pt");
  {
    torch::serialize::OutputArchive archive;
    archive.write("weights", torch::ones({3}));
    archive.save_to(foreign);
  }

  auto fresh = make_strategy(3);
  EXPECT_NE(error_loading(*fresh, truncated).find("damaged"), std::string::npos);
  EXPECT_NE(error_loading(*fresh, foreign).find("not an OTF-Torch training state"),
            std::string::npos);
  EXPECT_NE(error_loading(*fresh, scratch_file("missing.pt")).find("cannot open"),
            std::string::npos);
  auto without_schedule = make_strategy(3, /*with_schedule=*/false);
  EXPECT_NE(error_loading(*without_schedule, good).find("learning-rate schedule"),
            std::string::npos);
  for (const auto& file : {good, truncated, foreign}) std::filesystem::remove(file);
}

TEST(TrainingCheckpoint, HookWritesEveryIntervalOfExecutedSteps) {
  const auto batches = make_batches();
  const auto folder = std::filesystem::path(scratch_file("hook-dir"));
  auto strategy = make_strategy(1);
  auto hook = std::make_shared<CheckpointHook>(folder.string(), 2);
  strategy->register_hook(hook);
  for (int i = 0; i < 12; ++i) strategy->train_batch(batches[i % batches.size()]);
  const int64_t steps = strategy->counters().step_count;
  ASSERT_GE(steps, 2);
  EXPECT_TRUE(std::filesystem::exists(folder / "latest.pt"));
  EXPECT_EQ(hook->last_checkpoint_path(),
            (folder / ("checkpoint-" + std::to_string(steps - steps % 2) + ".pt")).string());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, static_cast<int>(steps / 2) + 1);  // one per even step, plus latest.pt
  EXPECT_THROW(CheckpointHook(folder.string(), 0), std::invalid_argument);
  std::filesystem::remove_all(folder);
}

}  // namespace

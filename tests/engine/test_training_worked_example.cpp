// A worked example of the training engine end to end: a small atomistic network is fitted to the
// energies and forces of a toy system (random configurations labelled by a teacher network of the
// same form), through TrainingStrategy with a MixedPrecisionHook, in float32, bfloat16 and float16
// (float16 emulated on CPU, GradScaler included). The loss must fall at least five-fold in each.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <numeric>
#include <vector>

#include "autocast_region.h"
#include "grad_scaler.h"
#include "mixed_precision_hook.h"
#include "precision.h"
#include "training_strategy.h"

namespace {

using otf::Precision;

constexpr int64_t kAtomsPerFrame = 12;
constexpr int64_t kFramesPerBatch = 2;
constexpr int64_t kBatches = 4;
constexpr int64_t kDescriptorFrequencies = 8;

// Atomic energies from smooth per-atom descriptors (sines and cosines of projected positions);
// the frame energy is their sum and the forces are -dE/dpositions, with the graph kept so that a
// force loss trains the weights (double backward), as the reference's models do
// (docs/design.md §7.7).
struct AtomisticNetwork : torch::nn::Module {
  explicit AtomisticNetwork(const torch::Tensor& frequencies) {
    this->frequencies = register_buffer("frequencies", frequencies.clone());
    mlp = register_module("mlp",
                          torch::nn::Sequential(torch::nn::Linear(2 * kDescriptorFrequencies, 24),
                                                torch::nn::SiLU(), torch::nn::Linear(24, 24),
                                                torch::nn::SiLU(), torch::nn::Linear(24, 1)));
  }

  otf::Predictions forward(const otf::TrainingBatch& batch) {
    const torch::Tensor positions = batch.at("positions").detach().requires_grad_(true);
    const torch::Tensor phases = positions.matmul(frequencies);
    const torch::Tensor descriptors = torch::cat({torch::sin(phases), torch::cos(phases)}, 1);
    const torch::Tensor atomic_energies = mlp->forward(descriptors).squeeze(-1);
    atomic_energy_dtype = atomic_energies.scalar_type();
    const int64_t frames = batch.at("energy").size(0);
    // Out of place and into float32, so that a bfloat16 atomic energy is summed in float32.
    const torch::Tensor energy = torch::zeros({frames}, positions.options())
                                     .index_add(0, batch.at("frame_of_atom"), atomic_energies);
    const torch::Tensor forces = -torch::autograd::grad({energy.sum()}, {positions}, {},
                                                        /*retain_graph=*/true,
                                                        /*create_graph=*/is_training())[0];
    return {{"energy", energy}, {"forces", forces}};
  }

  torch::Tensor frequencies;
  torch::nn::Sequential mlp{nullptr};
  // What autocast made of the last forward: evidence that the precision is really applied.
  c10::ScalarType atomic_energy_dtype = c10::ScalarType::Undefined;
};

otf::LossOutput energy_and_force_loss(const otf::Predictions& predictions,
                                      const otf::TrainingBatch& batch, int64_t, int64_t) {
  auto [energy, energy_target] = otf::widen_for_loss(predictions.at("energy"), batch.at("energy"));
  auto [forces, forces_target] = otf::widen_for_loss(predictions.at("forces"), batch.at("forces"));
  const double atoms = static_cast<double>(kAtomsPerFrame);
  otf::LossOutput out;
  out.per_component_unweighted["energy"] = torch::mse_loss(energy / atoms, energy_target / atoms);
  out.per_component_unweighted["forces"] = torch::mse_loss(forces, forces_target);
  out.per_component_weight = {{"energy", 1.0}, {"forces", 1.0}};
  out.total_loss = out.per_component_unweighted["energy"] + out.per_component_unweighted["forces"];
  return out;
}

std::vector<otf::TrainingBatch> toy_dataset(AtomisticNetwork& teacher) {
  std::vector<otf::TrainingBatch> batches;
  const int64_t atoms = kAtomsPerFrame * kFramesPerBatch;
  const torch::Tensor frame_of_atom =
      torch::arange(kFramesPerBatch).repeat_interleave(kAtomsPerFrame);
  for (int64_t b = 0; b < kBatches; ++b) {
    otf::TrainingBatch batch({{"positions", torch::rand({atoms, 3}) * 4.0},
                              {"frame_of_atom", frame_of_atom},
                              {"energy", torch::zeros({kFramesPerBatch})}});
    const otf::Predictions labels = teacher.forward(batch);
    batch.set("energy", labels.at("energy").detach());
    batch.set("forces", labels.at("forces").detach());
    batches.push_back(batch);
  }
  return batches;
}

struct FitResult {
  double first_epoch_loss;
  double last_epoch_loss;
  int64_t executed_steps;
  int64_t batches;
  double final_scale;  // 1 without a GradScaler
  c10::ScalarType atomic_energy_dtype;
};

FitResult fit(Precision precision) {
  torch::manual_seed(11);
  const torch::Tensor frequencies = torch::randn({3, kDescriptorFrequencies}) * 0.8;
  AtomisticNetwork teacher(frequencies);
  teacher.train(false);
  {
    // Labels of order one (eV-like energies per atom, forces of a few units): a loss that starts
    // near 1, and float16 gradients that overflow GradScaler's first scales for real.
    torch::NoGradGuard no_grad;
    teacher.mlp->ptr(4)->as<torch::nn::Linear>()->weight.mul_(20.0);
  }
  const std::vector<otf::TrainingBatch> batches = toy_dataset(teacher);
  auto student = std::make_shared<AtomisticNetwork>(frequencies);

  std::vector<double> losses;  // detached, unscaled, one per batch
  auto loss_logger = std::make_shared<otf::CallbackHook>(
      otf::TrainingStage::AfterBackward, [&losses](otf::TrainContext& ctx, otf::TrainingStage) {
        losses.push_back(ctx.loss.item<double>());
      });

  otf::TrainingStrategyOptions options;
  options.models["main"] = student;
  options.training_fn = [](const otf::NamedModels& models, const otf::TrainingBatch& batch) {
    return models.at("main")->as<AtomisticNetwork>()->forward(batch);
  };
  options.loss_fn = energy_and_force_loss;
  otf::OptimizerConfig adam;
  adam.make_optimizer = [](std::vector<torch::Tensor> parameters) {
    return std::make_unique<torch::optim::Adam>(std::move(parameters),
                                                torch::optim::AdamOptions(5e-3));
  };
  options.optimizer_configs = {adam};
  options.num_epochs = 50;
  options.hooks = {loss_logger, std::make_shared<otf::MixedPrecisionHook>(precision)};
  otf::TrainingStrategy strategy(std::move(options));
  strategy.run(batches);

  auto epoch_mean = [&](std::size_t first) {
    return std::accumulate(losses.begin() + static_cast<std::ptrdiff_t>(first),
                           losses.begin() + static_cast<std::ptrdiff_t>(first + kBatches), 0.0) /
           static_cast<double>(kBatches);
  };
  return {epoch_mean(0),
          epoch_mean(losses.size() - kBatches),
          strategy.counters().step_count,
          strategy.counters().batch_count,
          strategy.grad_scaler() != nullptr ? strategy.grad_scaler()->get_scale() : 1.0,
          student->atomic_energy_dtype};
}

class WorkedExample : public ::testing::TestWithParam<Precision> {};

TEST_P(WorkedExample, LossFallsFiveFold) {
  const Precision precision = GetParam();
  const FitResult result = fit(precision);
  std::printf("%s: loss %.4g -> %.4g over %lld steps (%lld batches), final loss scale %g\n",
              otf::to_string(precision).c_str(), result.first_epoch_loss, result.last_epoch_loss,
              static_cast<long long>(result.executed_steps), static_cast<long long>(result.batches),
              result.final_scale);
  EXPECT_EQ(result.executed_steps, 50 * kBatches) << "num_epochs counts executed steps";
  // bfloat16 runs the MLP in bfloat16; float16 is emulated in float32 storage (autocast_region.h).
  EXPECT_EQ(result.atomic_energy_dtype,
            precision == Precision::BFloat16 ? torch::kBFloat16 : torch::kFloat32);
  EXPECT_LT(result.last_epoch_loss, result.first_epoch_loss / 5.0);
}

INSTANTIATE_TEST_SUITE_P(EveryPrecision, WorkedExample,
                         ::testing::Values(Precision::Float32, Precision::BFloat16,
                                           Precision::Float16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return otf::to_string(info.param);
                         });

}  // namespace

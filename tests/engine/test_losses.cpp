// Tests of the energy, force and stress losses and their composition, on small hand-computed
// tensors: exact values, Huber on both sides of delta, per-atom energies, masks, the rank-split
// identity used for data parallelism, bf16 predictions against fp32/fp64 targets (docs/design.md
// §7.8, pitfalls 1 and 3), and the errors a user sees.
#include "losses.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "precision.h"

#include "expect_error.h"

namespace {

using otf::ComposedLoss;
using otf::ComposedLossSettings;
using otf::EnergyLossOptions;
using otf::ForceLossOptions;
using otf::LossKind;
using otf::StressLossOptions;

const torch::TensorOptions kFloat = torch::TensorOptions().dtype(torch::kFloat);
const torch::TensorOptions kDouble = torch::TensorOptions().dtype(torch::kDouble);
const torch::TensorOptions kBFloat16 = torch::TensorOptions().dtype(torch::kBFloat16);

using otf::testing::expect_error;

torch::Tensor tensor(std::vector<double> values, torch::TensorOptions options = kFloat) {
  return torch::tensor(values, kDouble).to(options.dtype());
}

double value(const torch::Tensor& scalar) { return scalar.item<double>(); }

EnergyLossOptions energy_options(LossKind kind, bool per_atom, double delta = 0.01) {
  EnergyLossOptions options;
  options.kind = kind;
  options.per_atom = per_atom;
  options.huber_delta = delta;
  return options;
}

ForceLossOptions force_options(LossKind kind, double delta = 0.01) {
  ForceLossOptions options;
  options.kind = kind;
  options.huber_delta = delta;
  return options;
}

TEST(LossKind, ParsesAndRejects) {
  EXPECT_EQ(otf::parse_loss_kind("mse"), LossKind::MSE);
  EXPECT_EQ(otf::parse_loss_kind(" MSE "), LossKind::MSE);
  EXPECT_EQ(otf::parse_loss_kind("Huber"), LossKind::Huber);
  EXPECT_EQ(otf::to_string(LossKind::Huber), "huber");
  for (const std::string bad : {"mae", "l2", "", "huber2"}) {
    expect_error<std::invalid_argument>([&] { otf::parse_loss_kind(bad); },
                                        {"unknown loss '" + bad + "'", "mse, huber"});
  }
}

// Huber with delta 1: 0.5 r^2 below delta, delta (|r| - delta/2) at and above it.
TEST(PointwiseLoss, MseAndHuberOnBothSidesOfDelta) {
  const torch::Tensor prediction = tensor({0.5, -0.5, 3.0, -2.0, 1.0});
  const torch::Tensor target = torch::zeros({5}, kFloat);
  EXPECT_TRUE(torch::equal(otf::pointwise_loss(prediction, target, LossKind::MSE),
                           tensor({0.25, 0.25, 9.0, 4.0, 1.0})));
  EXPECT_TRUE(torch::equal(otf::pointwise_loss(prediction, target, LossKind::Huber, 1.0),
                           tensor({0.125, 0.125, 2.5, 1.5, 0.5})));
}

TEST(EnergyLoss, TotalEnergyMseAndHuber) {
  const torch::Tensor prediction = tensor({1.0, 2.0, 3.0, 4.0});
  const torch::Tensor target = tensor({0.0, 0.0, 0.0, 2.0});
  // residuals 1, 2, 3, 2: squares 1 + 4 + 9 + 4 = 18 over 4 frames.
  const torch::Tensor mse =
      otf::energy_loss(prediction, target, {}, energy_options(LossKind::MSE, false));
  EXPECT_EQ(mse.scalar_type(), torch::kFloat);
  EXPECT_EQ(mse.dim(), 0);
  EXPECT_EQ(value(mse), 4.5);
  // delta 2.5: 0.5, 2, 2.5 * (3 - 1.25) = 4.375, 2 -> 8.875 / 4.
  const torch::Tensor huber =
      otf::energy_loss(prediction, target, {}, energy_options(LossKind::Huber, false, 2.5));
  EXPECT_EQ(value(huber), 8.875 / 4.0);
  const otf::LossSum partial =
      otf::energy_loss_sum(prediction, target, {}, energy_options(LossKind::MSE, false));
  EXPECT_EQ(value(partial.sum), 18.0);
  EXPECT_EQ(value(partial.count), 4.0);
}

// docs/design.md §10: sum_i N_i ((Ep_i - Et_i) / N_i)^2 / sum_i N_i.
TEST(EnergyLoss, PerAtomMseWeightsFramesByAtomCount) {
  const torch::Tensor prediction = tensor({4.0, 9.0}, kDouble);
  const torch::Tensor target = tensor({2.0, 3.0}, kDouble);
  const torch::Tensor atoms = torch::tensor({2, 3}, torch::kLong);
  // per-atom residuals 1 and 2: (2 * 1 + 3 * 4) / 5 = 14 / 5.
  const torch::Tensor loss =
      otf::energy_loss(prediction, target, atoms, energy_options(LossKind::MSE, true));
  EXPECT_EQ(loss.scalar_type(), torch::kDouble);
  EXPECT_EQ(value(loss), 14.0 / 5.0);
  const otf::LossSum partial =
      otf::energy_loss_sum(prediction, target, atoms, energy_options(LossKind::MSE, true));
  EXPECT_EQ(value(partial.sum), 14.0);
  EXPECT_EQ(value(partial.count), 5.0);
}

TEST(EnergyLoss, PerAtomHuberUsesTheSameAtomWeights) {
  const torch::Tensor prediction = tensor({3.0, 9.0}, kDouble);
  const torch::Tensor target = tensor({2.0, 3.0}, kDouble);
  const torch::Tensor atoms = tensor({2.0, 3.0});
  // per-atom residuals 0.5 (< delta 1: 0.125) and 2 (> delta: 1.5): (2 * 0.125 + 3 * 1.5) / 5.
  const torch::Tensor loss =
      otf::energy_loss(prediction, target, atoms, energy_options(LossKind::Huber, true, 1.0));
  EXPECT_EQ(value(loss), 4.75 / 5.0);
}

TEST(EnergyLoss, AcceptsFramesByOneAndRejectsMismatches) {
  const torch::Tensor column = tensor({1.0, 2.0, 3.0, 4.0}).reshape({4, 1});
  const torch::Tensor flat = tensor({0.0, 0.0, 0.0, 2.0});
  EXPECT_EQ(value(otf::energy_loss(column, flat, {}, energy_options(LossKind::MSE, false))), 4.5);
  expect_error<std::invalid_argument>(
      [&] {
        otf::energy_loss(tensor({1.0, 2.0, 3.0}), flat, {}, energy_options(LossKind::MSE, false));
      },
      {"energy loss", "[3]", "[4]"});
  expect_error<std::invalid_argument>(
      [&] {
        otf::energy_loss(torch::zeros({4, 2}), flat, {}, energy_options(LossKind::MSE, false));
      },
      {"energy prediction", "[frames] or [frames,1]"});
  expect_error<std::invalid_argument>(
      [&] { otf::energy_loss(flat, flat, {}, energy_options(LossKind::MSE, true)); },
      {"per_atom needs 'atoms_per_frame'"});
  expect_error<std::invalid_argument>(
      [&] {
        otf::energy_loss(flat, flat, tensor({1.0, 2.0}), energy_options(LossKind::MSE, true));
      },
      {"atoms_per_frame has 2 frames", "energies have 4"});
  expect_error<std::invalid_argument>(
      [&] { otf::energy_loss(flat, flat, {}, energy_options(LossKind::Huber, false, 0.0)); },
      {"Huber delta must be finite and > 0", "got 0"});
}

TEST(ForceLoss, MeanOverComponents) {
  const torch::Tensor prediction = tensor({1, 1, 2, 1, 1, 2}).reshape({2, 3});
  const torch::Tensor target = torch::zeros({2, 3}, kFloat);
  // 1 + 1 + 4 + 1 + 1 + 4 = 12 over 6 components.
  EXPECT_EQ(value(otf::force_loss(prediction, target, {}, force_options(LossKind::MSE))), 2.0);
  // delta 1.5: 0.5, 0.5, 1.5 * (2 - 0.75) = 1.875, twice -> 5.75 / 6.
  EXPECT_EQ(value(otf::force_loss(prediction, target, {}, force_options(LossKind::Huber, 1.5))),
            static_cast<double>(5.75f / 6.0f));
  const otf::LossSum partial =
      otf::force_loss_sum(prediction, target, {}, force_options(LossKind::MSE));
  EXPECT_EQ(value(partial.sum), 12.0);
  EXPECT_EQ(value(partial.count), 6.0);
}

// The mask keeps the first two atoms; the third (a ghost with NaN forces) touches neither the
// value nor the gradient.
TEST(ForceLoss, MaskSelectsAtomsAndKeepsGarbageOut) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const torch::Tensor prediction =
      tensor({1, 1, 2, 1, 1, 2, nan, nan, nan}).reshape({3, 3}).requires_grad_(true);
  const torch::Tensor target = tensor({0, 0, 0, 0, 0, 0, nan, 1, 2}).reshape({3, 3});
  const torch::Tensor mask = torch::tensor({true, true, false});
  const torch::Tensor loss =
      otf::force_loss(prediction, target, mask, force_options(LossKind::MSE));
  EXPECT_EQ(value(loss), 2.0);
  loss.backward();
  const torch::Tensor grad = prediction.grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_FALSE(grad.isnan().any().item<bool>());
  // d/dp (sum p^2 / 6) = p / 3 on the counted atoms, 0 on the ghost.
  EXPECT_TRUE(torch::allclose(grad, tensor({1, 1, 2, 1, 1, 2, 0, 0, 0}).reshape({3, 3}) / 3.0));
  EXPECT_TRUE(torch::equal(grad[2], torch::zeros({3}, kFloat)));

  const torch::Tensor nothing = torch::zeros({3}, torch::kBool);
  const torch::Tensor empty_loss =
      otf::force_loss(prediction.detach(), target, nothing, force_options(LossKind::MSE));
  EXPECT_EQ(value(empty_loss), 0.0);  // a rank that owns no atom contributes 0, not NaN
}

// Two "ranks" own atoms {0, 2} and {1, 3}. With the global count as normalizer, the per-rank
// losses and their gradients sum to the single-process ones.
TEST(ForceLoss, RankLossesWithTheGlobalCountSumToTheSingleProcessLoss) {
  const torch::Tensor target =
      tensor({0.5, -1, 2, 0, 0.25, 1, -2, 3, 0.5, 1, 1, -1}).reshape({4, 3});
  const torch::Tensor base = tensor({1, 0, 2, 0.5, 0.25, -1, -2, 1, 0, 1, 3, -1}).reshape({4, 3});
  for (const LossKind kind : {LossKind::MSE, LossKind::Huber}) {
    const ForceLossOptions options = force_options(kind, 1.0);
    const torch::Tensor whole = base.clone().requires_grad_(true);
    const torch::Tensor single = otf::force_loss(whole, target, {}, options);
    single.backward();

    const std::vector<torch::Tensor> masks{torch::tensor({true, false, true, false}),
                                           torch::tensor({false, true, false, true})};
    torch::Tensor global_count = torch::zeros({}, kFloat);
    for (const auto& mask : masks) {
      global_count += otf::force_loss_sum(base, target, mask, options).count;  // MPI_SUM
    }
    EXPECT_EQ(value(global_count), 12.0);
    double summed_loss = 0.0;
    torch::Tensor summed_grad = torch::zeros({4, 3}, kFloat);
    for (const auto& mask : masks) {
      ForceLossOptions rank_options = options;
      rank_options.normalizer = value(global_count);
      const torch::Tensor local = base.clone().requires_grad_(true);
      const torch::Tensor rank_loss = otf::force_loss(local, target, mask, rank_options);
      rank_loss.backward();
      summed_loss += value(rank_loss);
      summed_grad += local.grad();
      // The tensor normalizer (no host synchronisation) gives the same value.
      EXPECT_EQ(value(otf::force_loss_sum(base, target, mask, options).divided_by(global_count)),
                value(rank_loss));
    }
    EXPECT_FLOAT_EQ(summed_loss, value(single)) << otf::to_string(kind);
    EXPECT_TRUE(torch::allclose(summed_grad, whole.grad())) << otf::to_string(kind);
  }
}

TEST(ForceLoss, RejectsBadShapesMasksAndNormalizers) {
  const torch::Tensor forces = torch::zeros({3, 3}, kFloat);
  expect_error<std::invalid_argument>(
      [&] {
        otf::force_loss(torch::zeros({3, 2}), torch::zeros({3, 2}), {}, {});
      },
      {"[atoms,3]", "[3, 2]"});
  expect_error<std::invalid_argument>(
      [&] {
        otf::force_loss(forces, torch::zeros({4, 3}), {}, {});
      },
      {"[3, 3]", "[4, 3]"});
  expect_error<std::invalid_argument>(
      [&] { otf::force_loss(forces, forces, torch::ones({3}, torch::kLong), {}); },
      {"force_mask must be a bool tensor", "Long"});
  expect_error<std::invalid_argument>(
      [&] { otf::force_loss(forces, forces, torch::ones({2}, torch::kBool), {}); },
      {"force_mask must have shape [3]"});
  ForceLossOptions zero_normalizer;
  zero_normalizer.normalizer = 0.0;
  expect_error<std::invalid_argument>([&] { otf::force_loss(forces, forces, {}, zero_normalizer); },
                                      {"normalizer must be finite and > 0"});
  expect_error<std::invalid_argument>(
      [&] { otf::force_loss(forces.to(torch::kLong), forces, {}, {}); },
      {"force prediction must be a floating-point tensor"});
}

TEST(StressLoss, FullAndVoigtLayouts) {
  // [1,3,3]: residual 3 on xx, 1 on xy and yx: 9 + 1 + 1 = 11 over 9.
  torch::Tensor full = torch::zeros({1, 3, 3}, kDouble);
  full[0][0][0] = 3.0;
  full[0][0][1] = 1.0;
  full[0][1][0] = 1.0;
  EXPECT_EQ(value(otf::stress_loss(full, torch::zeros({1, 3, 3}, kDouble), {})), 11.0 / 9.0);
  // Voigt [2,6]: squares 4 + 4 + 1 + 1 = 10 over 12; Huber delta 1: 1.5 + 1.5 + 0.5 + 0.5 = 4.
  const torch::Tensor voigt =
      tensor({2, 0, 0, 0, 0, -1, 0, -2, 0, 1, 0, 0}, kDouble).reshape({2, 6});
  const torch::Tensor zeros = torch::zeros({2, 6}, kDouble);
  EXPECT_EQ(value(otf::stress_loss(voigt, zeros, {})), 10.0 / 12.0);
  StressLossOptions huber;
  huber.kind = LossKind::Huber;
  huber.huber_delta = 1.0;
  EXPECT_EQ(value(otf::stress_loss(voigt, zeros, huber)), 4.0 / 12.0);
  expect_error<std::invalid_argument>([&] { otf::stress_loss(voigt, full, {}); }, {"same layout"});
  expect_error<std::invalid_argument>(
      [&] {
        otf::stress_loss(torch::zeros({2, 9}), torch::zeros({2, 9}), {});
      },
      {"[frames,3,3] or Voigt [frames,6]"});
}

// mse_loss/huber_loss(bf16, fp32) backward throws in 1.13; ours widen first (docs/design.md
// §7.8, pitfall 3).
TEST(MixedDtypes, Bf16PredictionsAgainstWiderTargetsBackpropagate) {
  for (const LossKind kind : {LossKind::MSE, LossKind::Huber}) {
    for (const auto target_dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor energy = tensor({1.0, -2.0}, kBFloat16).requires_grad_(true);
      const torch::Tensor forces = tensor({1, 2, 3, -1, 0.5, 0}, kBFloat16).reshape({2, 3});
      forces.requires_grad_(true);
      const torch::Tensor stress = torch::ones({2, 3, 3}, kBFloat16).requires_grad_(true);
      const auto target_options = torch::TensorOptions().dtype(target_dtype);
      const torch::Tensor loss =
          otf::energy_loss(energy, torch::zeros({2}, target_options), tensor({3.0, 4.0}),
                           energy_options(kind, true)) +
          otf::force_loss(forces, torch::zeros({2, 3}, target_options),
                          torch::tensor({true, false}), force_options(kind)) +
          otf::stress_loss(stress, torch::zeros({2, 3, 3}, target_options), {});
      EXPECT_EQ(loss.scalar_type(), target_dtype);  // float32 or wider, never bf16
      ASSERT_NO_THROW(loss.backward());
      for (const auto& input : {energy, forces, stress}) {
        ASSERT_TRUE(input.grad().defined());
        EXPECT_EQ(input.grad().scalar_type(), torch::kBFloat16);
        EXPECT_TRUE(input.grad().abs().sum().item<double>() > 0.0);
      }
    }
  }
}

// docs/design.md §7.8, pitfall 1: 1000 bf16 residuals of 5 have squares summing to 25000, where
// bf16's spacing is 128; the reduction must run in float32 to give exactly 25.
TEST(MixedDtypes, ReductionsRunInFloat32ForBf16Inputs) {
  const torch::Tensor prediction = torch::full({1000, 3}, 5.0, kBFloat16);
  const torch::Tensor target = torch::zeros({1000, 3}, kBFloat16);
  const otf::LossSum partial =
      otf::force_loss_sum(prediction, target, {}, force_options(LossKind::MSE));
  EXPECT_EQ(partial.sum.scalar_type(), torch::kFloat);
  EXPECT_EQ(partial.count.scalar_type(), torch::kFloat);
  EXPECT_EQ(value(partial.sum), 75000.0);
  EXPECT_EQ(value(partial.mean()), 25.0);
  const torch::Tensor energy = torch::full({1000}, -5.0, kBFloat16);
  EXPECT_EQ(
      otf::pointwise_loss(energy, torch::zeros({1000}, kBFloat16), LossKind::MSE).scalar_type(),
      torch::kFloat);
}

// Inside a bf16 autocast region (the forward's), the loss is still float32 and its backward,
// taken outside the region, reaches the bf16 activations.
TEST(MixedDtypes, LossesInsideAnAutocastRegion) {
  torch::manual_seed(7);
  const torch::Tensor weight = torch::randn({3, 3}, kFloat).requires_grad_(true);
  const torch::Tensor input = torch::randn({4, 3}, kFloat);
  torch::Tensor loss;
  {
    otf::AutocastRegion region(torch::kCPU, otf::Precision::BFloat16);
    const torch::Tensor forces = torch::matmul(input, weight);
    ASSERT_EQ(forces.scalar_type(), torch::kBFloat16);
    loss = otf::force_loss(forces, torch::zeros({4, 3}, kFloat), {}, force_options(LossKind::MSE));
  }
  EXPECT_EQ(loss.scalar_type(), torch::kFloat);
  ASSERT_NO_THROW(loss.backward());
  ASSERT_TRUE(weight.grad().defined());
  EXPECT_EQ(weight.grad().scalar_type(), torch::kFloat);
}

// A batch of two frames, 2 + 3 atoms, with the conventional names of training_batch.h.
struct Example {
  otf::Predictions predictions;
  otf::TrainingBatch batch;
};

Example make_example() {
  Example example;
  example.predictions["energy"] = tensor({4.0, 9.0}).requires_grad_(true);
  example.predictions["forces"] =
      tensor({1, 1, 2, 1, 1, 2, 0, 0, 0, 0, 0, 0, 7, 7, 7}).reshape({5, 3}).requires_grad_(true);
  example.predictions["stress"] = torch::zeros({2, 6}, kFloat).requires_grad_(true);
  example.batch.set("energy", tensor({2.0, 3.0}));
  example.batch.set("forces", torch::zeros({5, 3}, kFloat));
  example.batch.set("stress", tensor({3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}).reshape({2, 6}));
  example.batch.set("atoms_per_frame", torch::tensor({2, 3}, torch::kLong));
  return example;
}

ComposedLossSettings all_terms(double energy_weight, double forces_weight, double stress_weight) {
  ComposedLossSettings settings;
  settings.energy = otf::WeightedLoss<EnergyLossOptions>{energy_weight, {}};
  settings.forces = otf::WeightedLoss<ForceLossOptions>{forces_weight, {}};
  settings.stress = otf::WeightedLoss<StressLossOptions>{stress_weight, {}};
  return settings;
}

TEST(ComposedLoss, TotalIsTheWeightedSumOfTheComponents) {
  const Example example = make_example();
  ComposedLossSettings settings = all_terms(2.0, 3.0, 0.5);
  settings.energy->options.per_atom = true;
  const ComposedLoss loss(settings);
  const otf::LossOutput output = loss(example.predictions, example.batch);

  const auto& parts = output.per_component_unweighted;
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(value(parts.at("energy")), static_cast<double>(14.0f / 5.0f));  // per atom: 14 / 5
  // forces: (1 + 1 + 4 + 1 + 1 + 4 + 3 * 49) / 15 = 159 / 15.
  EXPECT_EQ(value(parts.at("forces")), static_cast<double>(159.0f / 15.0f));
  EXPECT_EQ(value(parts.at("stress")), 9.0 / 12.0);
  EXPECT_EQ(output.per_component_weight,
            (std::map<std::string, double>{{"energy", 2.0}, {"forces", 3.0}, {"stress", 0.5}}));
  const torch::Tensor expected =
      parts.at("energy") * 2.0 + parts.at("forces") * 3.0 + parts.at("stress") * 0.5;
  EXPECT_TRUE(torch::equal(output.total_loss, expected));
  EXPECT_EQ(output.total_loss.scalar_type(), torch::kFloat);
  ASSERT_NO_THROW(output.total_loss.backward());
  EXPECT_TRUE(example.predictions.at("forces").grad().defined());
}

TEST(ComposedLoss, UsesTheForceMaskAndNormalizersOfTheBatch) {
  Example example = make_example();
  example.batch.set("force_mask", torch::tensor({true, true, false, false, false}));
  ComposedLossSettings settings;
  settings.forces = otf::WeightedLoss<ForceLossOptions>{1.0, {}};
  const ComposedLoss loss(settings);
  EXPECT_EQ(value(loss(example.predictions, example.batch).total_loss), 2.0);  // 12 / 6
  example.batch.set("forces_loss_normalizer", torch::full({}, 24.0, kFloat));
  EXPECT_EQ(value(loss(example.predictions, example.batch).total_loss), 0.5);  // 12 / 24
}

TEST(ComposedLoss, NormalizesWeightsOnlyWhenAsked) {
  const Example example = make_example();
  ComposedLossSettings settings = all_terms(2.0, 3.0, 5.0);
  EXPECT_EQ(ComposedLoss(settings).effective_weights(),
            (std::map<std::string, double>{{"energy", 2.0}, {"forces", 3.0}, {"stress", 5.0}}));
  settings.normalize_weights = true;
  const ComposedLoss normalized(settings);
  const otf::LossOutput output = normalized(example.predictions, example.batch);
  EXPECT_EQ(output.per_component_weight,
            (std::map<std::string, double>{
                {"energy", 2.0 / 10.0}, {"forces", 3.0 / 10.0}, {"stress", 5.0 / 10.0}}));
  const auto& parts = output.per_component_unweighted;
  EXPECT_TRUE(torch::equal(output.total_loss, parts.at("energy") * 0.2 + parts.at("forces") * 0.3 +
                                                  parts.at("stress") * 0.5));
}

TEST(ComposedLoss, ZeroWeightTermsAreReportedButLeftOutOfTheTotal) {
  Example example = make_example();
  example.predictions["stress"] =
      torch::full({2, 6}, std::numeric_limits<double>::quiet_NaN(), kFloat);
  const ComposedLoss loss(all_terms(1.0, 1.0, 0.0));
  const otf::LossOutput output = loss(example.predictions, example.batch);
  EXPECT_TRUE(std::isnan(value(output.per_component_unweighted.at("stress"))));
  EXPECT_EQ(output.per_component_weight.at("stress"), 0.0);
  EXPECT_TRUE(std::isfinite(value(output.total_loss)));
  EXPECT_TRUE(
      torch::equal(output.total_loss, output.per_component_unweighted.at("energy") * 1.0 +
                                          output.per_component_unweighted.at("forces") * 1.0));
}

TEST(ComposedLoss, MissingTensorsAreNamed) {
  Example example = make_example();
  example.predictions.erase("stress");
  expect_error<std::out_of_range>(
      [&] { ComposedLoss(all_terms(1.0, 1.0, 1.0))(example.predictions, example.batch); },
      {"predictions have no tensor 'stress'", "energy, forces", "stress loss needs it"});

  Example no_counts = make_example();
  otf::TrainingBatch batch;
  for (const auto& [name, named_tensor] : no_counts.batch.tensors()) {
    if (name != "atoms_per_frame") batch.set(name, named_tensor);
  }
  ComposedLossSettings per_atom;
  per_atom.energy = otf::WeightedLoss<EnergyLossOptions>{1.0, {}};
  per_atom.energy->options.per_atom = true;
  expect_error<std::out_of_range>([&] { ComposedLoss{per_atom}(no_counts.predictions, batch); },
                                  {"'atoms_per_frame'", "energy loss needs it"});

  otf::TrainingBatch no_forces;
  no_forces.set("energy", tensor({0.0, 0.0}));
  expect_error<std::out_of_range>(
      [&] { ComposedLoss(all_terms(0.0, 1.0, 0.0))(make_example().predictions, no_forces); },
      {"no tensor 'forces'"});
}

TEST(ComposedLoss, RejectsBadWeights) {
  expect_error<std::invalid_argument>([] { ComposedLoss(ComposedLossSettings{}); }, {"no terms"});
  expect_error<std::invalid_argument>([] { ComposedLoss(all_terms(1.0, -1.0, 1.0)); },
                                      {"weight of 'forces'", "finite and >= 0", "-1"});
  expect_error<std::invalid_argument>([] { ComposedLoss(all_terms(std::nan(""), 1.0, 1.0)); },
                                      {"weight of 'energy'"});
  expect_error<std::invalid_argument>(
      [] { ComposedLoss(all_terms(1.0, 1.0, std::numeric_limits<double>::infinity())); },
      {"weight of 'stress'"});
  expect_error<std::invalid_argument>([] { ComposedLoss(all_terms(0.0, 0.0, 0.0)); },
                                      {"every weight is 0"});
  ComposedLossSettings bad_delta = all_terms(1.0, 1.0, 1.0);
  bad_delta.forces->options.kind = LossKind::Huber;
  bad_delta.forces->options.huber_delta = -1.0;
  expect_error<std::invalid_argument>([&] { ComposedLoss{bad_delta}; },
                                      {"force loss: Huber delta"});
}

}  // namespace

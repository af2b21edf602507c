// Tests of otf::make_optimizer and the optimizer keyword: each kind must step exactly like
// LibTorch's own optimizer built with the same options, the settings must reach the optimizer,
// and bad names or settings must be rejected with a message a user can act on.
#include "optimizer_factory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "expect_error.h"

namespace {

using otf::make_optimizer;
using otf::OptimizerKind;
using otf::OptimizerSettings;

template <typename Callable>
void expect_invalid_argument(Callable&& callable, const std::vector<std::string>& fragments) {
  otf::testing::expect_error<std::invalid_argument>(std::forward<Callable>(callable), fragments);
}

// Two leaf parameters with fixed values; each call returns fresh, identical copies.
std::vector<torch::Tensor> make_parameters() {
  torch::manual_seed(1234);
  return {torch::randn({4, 3}).requires_grad_(true), torch::randn({3}).requires_grad_(true)};
}

// A fixed loss whose gradients change with the parameters, so momentum and moments matter.
void compute_gradients(const std::vector<torch::Tensor>& params) {
  for (const auto& param : params) {
    if (param.grad().defined()) param.grad().zero_();
  }
  const torch::Tensor loss = (params[0].sin() * 1.5).pow(2).sum() + (params[1] * 3.0).exp().sum();
  loss.backward();
}

bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         torch::equal(a.contiguous().view(torch::kByte), b.contiguous().view(torch::kByte));
}

// Steps both optimizers `steps` times on identical parameters and expects identical bits.
void expect_same_trajectory(
    OptimizerKind kind, const OptimizerSettings& settings,
    const std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>&
        make_reference) {
  const std::vector<torch::Tensor> ours = make_parameters();
  const std::vector<torch::Tensor> theirs = make_parameters();
  const auto our_optimizer = make_optimizer(kind, ours, settings);
  const auto reference = make_reference(theirs);
  for (int step = 0; step < 6; ++step) {
    compute_gradients(ours);
    compute_gradients(theirs);
    our_optimizer->step();
    reference->step();
    for (size_t i = 0; i < ours.size(); ++i) {
      ASSERT_TRUE(bitwise_equal(ours[i], theirs[i])) << to_string(kind) << " step " << step;
    }
  }
  // The trajectory moved: a test that never changes the parameters would prove nothing.
  EXPECT_FALSE(torch::equal(ours[0], make_parameters()[0]));
}

TEST(OptimizerKind, ParsesEveryNameInAnyCase) {
  EXPECT_EQ(otf::parse_optimizer_kind("adam"), OptimizerKind::Adam);
  EXPECT_EQ(otf::parse_optimizer_kind("ADAM"), OptimizerKind::Adam);
  EXPECT_EQ(otf::parse_optimizer_kind(" AdamW "), OptimizerKind::AdamW);
  EXPECT_EQ(otf::parse_optimizer_kind("Sgd"), OptimizerKind::SGD);
  for (const auto kind : {OptimizerKind::Adam, OptimizerKind::AdamW, OptimizerKind::SGD}) {
    EXPECT_EQ(otf::parse_optimizer_kind(otf::to_string(kind)), kind);
  }
  EXPECT_EQ(otf::to_string(OptimizerKind::AdamW), "adamw");
}

TEST(OptimizerKind, RejectsUnknownNamesListingTheAcceptedOnes) {
  for (const std::string bad : {"adagrad", "", "adam w", "lbfgs", "adamax"}) {
    expect_invalid_argument([&] { otf::parse_optimizer_kind(bad); },
                            {"unknown optimizer '" + bad + "'", "adam, adamw, sgd"});
  }
}

TEST(MakeOptimizer, AdamStepsExactlyAsLibTorchAdam) {
  OptimizerSettings settings;
  settings.learning_rate = 0.01;
  settings.betas = {0.8, 0.99};
  settings.eps = 1e-6;
  settings.weight_decay = 0.05;
  settings.amsgrad = true;
  expect_same_trajectory(OptimizerKind::Adam, settings, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.01)
                                                            .betas(std::make_tuple(0.8, 0.99))
                                                            .eps(1e-6)
                                                            .weight_decay(0.05)
                                                            .amsgrad(true));
  });
}

TEST(MakeOptimizer, AdamWStepsExactlyAsLibTorchAdamW) {
  OptimizerSettings settings;
  settings.learning_rate = 0.02;
  settings.betas = {0.85, 0.995};
  settings.eps = 1e-7;
  settings.weight_decay = 0.1;
  expect_same_trajectory(OptimizerKind::AdamW, settings, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(0.02)
                                                             .betas(std::make_tuple(0.85, 0.995))
                                                             .eps(1e-7)
                                                             .weight_decay(0.1));
  });
}

TEST(MakeOptimizer, SgdStepsExactlyAsLibTorchSgd) {
  OptimizerSettings nesterov;
  nesterov.learning_rate = 0.05;
  nesterov.momentum = 0.9;
  nesterov.nesterov = true;
  nesterov.weight_decay = 0.01;
  expect_same_trajectory(OptimizerKind::SGD, nesterov, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(0.01));
  });

  OptimizerSettings dampened;
  dampened.learning_rate = 0.03;
  dampened.momentum = 0.5;
  dampened.dampening = 0.25;
  expect_same_trajectory(OptimizerKind::SGD, dampened, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(0.03).momentum(0.5).dampening(0.25));
  });
}

TEST(MakeOptimizer, DefaultSettingsAreLibTorchDefaults) {
  const OptimizerSettings defaults;
  expect_same_trajectory(OptimizerKind::Adam, defaults, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions());
  });
  expect_same_trajectory(OptimizerKind::AdamW, defaults, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions());
  });
  // LibTorch's SGD has no default learning rate; ours is Adam's 1e-3.
  expect_same_trajectory(OptimizerKind::SGD, defaults, [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-3));
  });
  EXPECT_EQ(otf::effective_weight_decay(OptimizerKind::Adam, defaults), 0.0);
  EXPECT_EQ(otf::effective_weight_decay(OptimizerKind::AdamW, defaults), 1e-2);
  EXPECT_EQ(otf::effective_weight_decay(OptimizerKind::SGD, defaults), 0.0);
}

TEST(MakeOptimizer, SettingsReachTheParamGroupOptions) {
  OptimizerSettings adam_settings;
  adam_settings.learning_rate = 0.004;
  adam_settings.betas = {0.7, 0.95};
  adam_settings.eps = 1e-5;
  adam_settings.weight_decay = 0.3;
  adam_settings.amsgrad = true;
  for (const auto kind : {OptimizerKind::Adam, OptimizerKind::AdamW}) {
    const auto optimizer = make_optimizer(kind, make_parameters(), adam_settings);
    ASSERT_EQ(optimizer->param_groups().size(), 1u);
    EXPECT_EQ(optimizer->param_groups()[0].params().size(), 2u);
    const auto& group_options = optimizer->param_groups()[0].options();
    EXPECT_EQ(group_options.get_lr(), 0.004);
    if (kind == OptimizerKind::Adam) {
      ASSERT_NE(dynamic_cast<torch::optim::Adam*>(optimizer.get()), nullptr);
      const auto& options = static_cast<const torch::optim::AdamOptions&>(group_options);
      EXPECT_EQ(options.betas(), std::make_tuple(0.7, 0.95));
      EXPECT_EQ(options.eps(), 1e-5);
      EXPECT_EQ(options.weight_decay(), 0.3);
      EXPECT_TRUE(options.amsgrad());
    } else {
      ASSERT_NE(dynamic_cast<torch::optim::AdamW*>(optimizer.get()), nullptr);
      const auto& options = static_cast<const torch::optim::AdamWOptions&>(group_options);
      EXPECT_EQ(options.betas(), std::make_tuple(0.7, 0.95));
      EXPECT_EQ(options.eps(), 1e-5);
      EXPECT_EQ(options.weight_decay(), 0.3);
      EXPECT_TRUE(options.amsgrad());
    }
  }

  OptimizerSettings sgd_settings;
  sgd_settings.learning_rate = 0.2;
  sgd_settings.momentum = 0.8;
  sgd_settings.dampening = 0.1;
  sgd_settings.weight_decay = 0.02;
  const auto sgd = make_optimizer(OptimizerKind::SGD, make_parameters(), sgd_settings);
  ASSERT_NE(dynamic_cast<torch::optim::SGD*>(sgd.get()), nullptr);
  const auto& options =
      static_cast<const torch::optim::SGDOptions&>(sgd->param_groups()[0].options());
  EXPECT_EQ(options.lr(), 0.2);
  EXPECT_EQ(options.momentum(), 0.8);
  EXPECT_EQ(options.dampening(), 0.1);
  EXPECT_EQ(options.weight_decay(), 0.02);
  EXPECT_FALSE(options.nesterov());

  const auto adamw_default = make_optimizer(OptimizerKind::AdamW, make_parameters());
  EXPECT_EQ(
      static_cast<const torch::optim::AdamWOptions&>(adamw_default->param_groups()[0].options())
          .weight_decay(),
      1e-2);
}

TEST(MakeOptimizer, RejectsBadParameters) {
  expect_invalid_argument([] { make_optimizer(OptimizerKind::Adam, {}); },
                          {"optimizer adam", "empty parameter list"});
  expect_invalid_argument([] { make_optimizer(OptimizerKind::SGD, {torch::Tensor()}); },
                          {"optimizer sgd", "parameter 0", "undefined"});
  expect_invalid_argument(
      [] { make_optimizer(OptimizerKind::Adam, {torch::zeros({2}, torch::kLong)}); },
      {"parameter 0", "Long", "floating-point"});
  const torch::Tensor leaf = torch::ones({2}).requires_grad_(true);
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::AdamW, {leaf, leaf * 2});
      },
      {"parameter 1", "not a leaf"});
}

TEST(MakeOptimizer, RejectsBadValues) {
  auto with = [](const std::function<void(OptimizerSettings&)>& change) {
    OptimizerSettings settings;
    change(settings);
    return settings;
  };
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::Adam, make_parameters(),
                       with([](auto& s) { s.learning_rate = -1e-3; }));
      },
      {"learning rate", "-0.001", ">= 0"});
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::SGD, make_parameters(),
                       with([](auto& s) { s.learning_rate = std::nan(""); }));
      },
      {"learning rate", "finite"});
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::Adam, make_parameters(), with([](auto& s) {
                         s.betas = {0.9, 1.0};
                       }));
      },
      {"betas (0.9, 1)", "[0, 1)"});
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::AdamW, make_parameters(),
                       with([](auto& s) { s.weight_decay = -0.1; }));
      },
      {"weight decay", "-0.1"});
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::SGD, make_parameters(),
                       with([](auto& s) { s.nesterov = true; }));
      },
      {"nesterov", "momentum > 0", "zero dampening"});
  expect_invalid_argument(
      [&] {
        make_optimizer(OptimizerKind::SGD, make_parameters(), with([](auto& s) {
                         s.nesterov = true;
                         s.momentum = 0.9;
                         s.dampening = 0.1;
                       }));
      },
      {"nesterov"});
}

TEST(MakeOptimizer, RejectsSettingsTheKindDoesNotUse) {
  OptimizerSettings momentum;
  momentum.momentum = 0.9;
  expect_invalid_argument([&] { make_optimizer(OptimizerKind::Adam, make_parameters(), momentum); },
                          {"optimizer adam", "momentum", "sgd"});
  OptimizerSettings betas;
  betas.betas = {0.5, 0.5};
  expect_invalid_argument([&] { make_optimizer(OptimizerKind::SGD, make_parameters(), betas); },
                          {"optimizer sgd", "betas", "adam/adamw"});
  OptimizerSettings amsgrad;
  amsgrad.amsgrad = true;
  expect_invalid_argument([&] { make_optimizer(OptimizerKind::SGD, make_parameters(), amsgrad); },
                          {"amsgrad"});
}

}  // namespace

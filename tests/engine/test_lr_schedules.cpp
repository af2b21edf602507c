// Tests of the learning-rate schedules against PyTorch's documented closed forms
// (torch/optim/lr_scheduler.py, 1.13) and ReduceLROnPlateau's step(): exact numbers, every
// parameter group updated, wrong-kind calls rejected, and save/load resuming the same sequence.
#include "lr_schedules.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect_error.h"

namespace {

using otf::LRScheduleKind;
using otf::LRScheduler;
using otf::LRScheduleSettings;
using otf::PlateauOptions;

constexpr double kPi = 3.14159265358979323846;

using otf::testing::expect_error;

// An SGD optimizer with one parameter group per learning rate.
std::unique_ptr<torch::optim::SGD> make_sgd(const std::vector<double>& lrs) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (const double lr : lrs) {
    groups.emplace_back(std::vector<torch::Tensor>{torch::zeros({2}).requires_grad_(true)},
                        std::make_unique<torch::optim::SGDOptions>(lr));
  }
  return std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(1.0));
}

std::vector<double> optimizer_lrs(const torch::optim::Optimizer& optimizer) {
  std::vector<double> lrs;
  for (const auto& group : optimizer.param_groups()) lrs.push_back(group.options().get_lr());
  return lrs;
}

// The rate after construction, then after each of `steps` calls to step().
std::vector<double> time_sequence(LRScheduler& schedule, const torch::optim::Optimizer& optimizer,
                                  int steps) {
  std::vector<double> lrs{schedule.current_lr()};
  EXPECT_EQ(optimizer_lrs(optimizer).front(), schedule.current_lr());
  for (int i = 0; i < steps; ++i) {
    schedule.step();
    EXPECT_EQ(optimizer_lrs(optimizer).front(), schedule.current_lr()) << "after step " << i + 1;
    lrs.push_back(schedule.current_lr());
  }
  return lrs;
}

std::vector<double> metric_sequence(LRScheduler& schedule, const std::vector<double>& metrics) {
  std::vector<double> lrs;
  for (const double metric : metrics) {
    schedule.step_with_metric(metric);
    lrs.push_back(schedule.current_lr());
  }
  return lrs;
}

std::string serialized(const LRScheduler& schedule) {
  torch::serialize::OutputArchive archive;
  schedule.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

void load_into(LRScheduler& schedule, const std::string& bytes) {
  std::istringstream stream(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(stream);
  schedule.load(archive);
}

TEST(LRScheduleKind, ParsesEveryKeywordInAnyCase) {
  EXPECT_EQ(otf::parse_lr_schedule_kind("none"), LRScheduleKind::None);
  EXPECT_EQ(otf::parse_lr_schedule_kind("STEP"), LRScheduleKind::Step);
  EXPECT_EQ(otf::parse_lr_schedule_kind(" Exponential "), LRScheduleKind::Exponential);
  EXPECT_EQ(otf::parse_lr_schedule_kind("cosine"), LRScheduleKind::Cosine);
  EXPECT_EQ(otf::parse_lr_schedule_kind("Plateau"), LRScheduleKind::Plateau);
  for (const auto kind : {LRScheduleKind::None, LRScheduleKind::Step, LRScheduleKind::Exponential,
                          LRScheduleKind::Cosine, LRScheduleKind::Plateau}) {
    EXPECT_EQ(otf::parse_lr_schedule_kind(otf::to_string(kind)), kind);
  }
}

TEST(LRScheduleKind, RejectsUnknownKeywordsListingTheAcceptedOnes) {
  for (const std::string bad : {"linear", "", "cos", "onecycle"}) {
    expect_error<std::invalid_argument>([&] { otf::parse_lr_schedule_kind(bad); },
                                        {"unknown learning-rate schedule '" + bad + "'",
                                         "none, step, exponential, cosine, plateau"});
  }
}

// PyTorch's docstring example shape: StepLR(step_size=2, gamma=0.5) from 1.0.
TEST(StepLR, HalvesEveryTwoSteps) {
  const auto optimizer = make_sgd({1.0});
  otf::StepLR schedule(*optimizer, 2, 0.5);
  EXPECT_EQ(time_sequence(schedule, *optimizer, 6),
            (std::vector<double>{1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125}));
  EXPECT_EQ(schedule.step_count(), 6);
  EXPECT_FALSE(schedule.is_metric_driven());
}

TEST(StepLR, SetsEveryParamGroupFromItsOwnBaseRate) {
  const auto optimizer = make_sgd({1.0, 0.1});
  otf::StepLR schedule(*optimizer, 1, 0.5);
  schedule.step();
  schedule.step();
  EXPECT_EQ(optimizer_lrs(*optimizer), (std::vector<double>{0.25, 0.1 * 0.25}));
  EXPECT_EQ(schedule.last_lrs(), optimizer_lrs(*optimizer));
  EXPECT_EQ(schedule.base_lrs(), (std::vector<double>{1.0, 0.1}));
}

TEST(ExponentialLR, MultipliesByGammaEachStep) {
  const auto optimizer = make_sgd({1.0});
  otf::ExponentialLR schedule(*optimizer, 0.9);
  const std::vector<double> lrs = time_sequence(schedule, *optimizer, 4);
  const std::vector<double> decimal{1.0, 0.9, 0.81, 0.729, 0.6561};
  for (size_t n = 0; n < lrs.size(); ++n) {
    EXPECT_EQ(lrs[n], std::pow(0.9, static_cast<double>(n)));  // the closed form, bit for bit
    EXPECT_DOUBLE_EQ(lrs[n], decimal[n]);
  }
}

TEST(CosineAnnealingLR, FollowsTheClosedForm) {
  const auto optimizer = make_sgd({1.0});
  otf::CosineAnnealingLR schedule(*optimizer, 10, 0.1);
  const std::vector<double> lrs = time_sequence(schedule, *optimizer, 20);
  EXPECT_EQ(lrs[0], 1.0);
  EXPECT_DOUBLE_EQ(lrs[5], 0.55);  // eta_min + (base - eta_min) / 2
  EXPECT_EQ(lrs[10], 0.1);         // cos(pi) is exactly -1 in double
  for (int n = 0; n <= 20; ++n) {
    EXPECT_EQ(lrs[n], 0.1 + (1.0 - 0.1) * (1.0 + std::cos(kPi * n / 10.0)) / 2.0) << n;
  }
  // PyTorch's schedule is periodic past T_max (period 2 T_max).
  EXPECT_DOUBLE_EQ(lrs[15], 0.55);
  EXPECT_DOUBLE_EQ(lrs[20], 1.0);
  for (int n = 1; n < 10; ++n) EXPECT_LT(lrs[n], lrs[n - 1]);
}

TEST(ConstantLR, KeepsTheRates) {
  const auto optimizer = make_sgd({0.3, 0.02});
  otf::ConstantLR schedule(*optimizer);
  EXPECT_EQ(time_sequence(schedule, *optimizer, 3), (std::vector<double>{0.3, 0.3, 0.3, 0.3}));
  EXPECT_EQ(optimizer_lrs(*optimizer), (std::vector<double>{0.3, 0.02}));
}

TEST(TimeBasedLRSchedule, RejectsBadHyperparameters) {
  const auto optimizer = make_sgd({1.0});
  expect_error<std::invalid_argument>([&] { otf::StepLR(*optimizer, 0, 0.5); },
                                      {"step_size must be >= 1", "got 0"});
  expect_error<std::invalid_argument>([&] { otf::StepLR(*optimizer, 1, -0.5); }, {"gamma"});
  expect_error<std::invalid_argument>(
      [&] { otf::ExponentialLR(*optimizer, std::numeric_limits<double>::infinity()); },
      {"gamma", "finite"});
  expect_error<std::invalid_argument>([&] { otf::CosineAnnealingLR(*optimizer, 0); },
                                      {"t_max must be >= 1"});
  expect_error<std::invalid_argument>([&] { otf::CosineAnnealingLR(*optimizer, 5, -1.0); },
                                      {"eta_min"});
}

TEST(TimeBasedLRSchedule, RejectsAChangedNumberOfParamGroups) {
  const auto optimizer = make_sgd({1.0});
  otf::StepLR schedule(*optimizer, 1, 0.5);
  optimizer->add_param_group(torch::optim::OptimizerParamGroup(
      {torch::zeros({1}).requires_grad_(true)}, std::make_unique<torch::optim::SGDOptions>(1.0)));
  expect_error<std::logic_error>([&] { schedule.step(); }, {"2 parameter groups", "rates for 1"});
}

// ReduceLROnPlateau(mode min, factor 0.5, patience 2): the lr drops on the third metric in a row
// that does not improve on the best (patience + 1), and the bad count restarts afterwards.
TEST(ReduceLROnPlateau, ReducesAfterPatiencePlusOneNonImprovingMetrics) {
  const auto optimizer = make_sgd({1.0});
  PlateauOptions options;
  options.factor = 0.5;
  options.patience = 2;
  otf::ReduceLROnPlateau schedule(*optimizer, options);
  EXPECT_TRUE(schedule.is_metric_driven());
  EXPECT_EQ(metric_sequence(schedule, {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.6, 0.6}),
            (std::vector<double>{1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25}));
  EXPECT_EQ(schedule.best(), 0.5);
  EXPECT_EQ(schedule.num_bad_metrics(), 2);
  EXPECT_EQ(optimizer_lrs(*optimizer).front(), 0.25);
}

TEST(ReduceLROnPlateau, UsesPyTorchDefaults) {
  const PlateauOptions defaults;
  EXPECT_EQ(defaults.mode, PlateauOptions::Mode::Min);
  EXPECT_EQ(defaults.factor, 0.1);
  EXPECT_EQ(defaults.patience, 10);
  EXPECT_EQ(defaults.threshold, 1e-4);
  EXPECT_EQ(defaults.threshold_mode, PlateauOptions::ThresholdMode::Relative);
  EXPECT_EQ(defaults.cooldown, 0);
  EXPECT_EQ(defaults.min_lr, 0.0);
  EXPECT_EQ(defaults.eps, 1e-8);

  const auto optimizer = make_sgd({1.0});
  otf::ReduceLROnPlateau schedule(*optimizer);
  std::vector<double> metrics(12, 2.0);
  const std::vector<double> lrs = metric_sequence(schedule, metrics);
  EXPECT_EQ(lrs[10], 1.0);  // 1 best + 10 bad = patience
  EXPECT_EQ(lrs[11], 1.0 * 0.1);
}

// Relative threshold 1e-4 in min mode: better means metric < best * (1 - 1e-4).
TEST(ReduceLROnPlateau, ImprovementsBelowTheThresholdDoNotCount) {
  const auto optimizer = make_sgd({1.0});
  PlateauOptions options;
  options.patience = 0;
  options.factor = 0.5;
  otf::ReduceLROnPlateau schedule(*optimizer, options);
  schedule.step_with_metric(1.0);
  schedule.step_with_metric(0.99995);  // not below 0.9999: bad, patience 0 -> reduce
  EXPECT_EQ(schedule.current_lr(), 0.5);
  EXPECT_EQ(schedule.best(), 1.0);
  schedule.step_with_metric(0.9998);  // better
  EXPECT_EQ(schedule.current_lr(), 0.5);
  EXPECT_EQ(schedule.best(), 0.9998);
  schedule.step_with_metric(std::nan(""));  // NaN is never better
  EXPECT_EQ(schedule.current_lr(), 0.25);

  PlateauOptions absolute;
  absolute.patience = 0;
  absolute.factor = 0.5;
  absolute.threshold = 0.1;
  absolute.threshold_mode = PlateauOptions::ThresholdMode::Absolute;
  const auto optimizer2 = make_sgd({1.0});
  otf::ReduceLROnPlateau absolute_schedule(*optimizer2, absolute);
  EXPECT_EQ(metric_sequence(absolute_schedule, {1.0, 0.95, 0.85}),
            (std::vector<double>{1.0, 0.5, 0.5}));
}

TEST(ReduceLROnPlateau, MaxModeWantsLargerMetrics) {
  const auto optimizer = make_sgd({1.0});
  PlateauOptions options;
  options.mode = PlateauOptions::Mode::Max;
  options.patience = 1;
  options.factor = 0.5;
  otf::ReduceLROnPlateau schedule(*optimizer, options);
  EXPECT_EQ(metric_sequence(schedule, {1.0, 2.0, 2.0, 1.0, 3.0}),
            (std::vector<double>{1.0, 1.0, 1.0, 0.5, 0.5}));
  EXPECT_EQ(schedule.best(), 3.0);
}

// Cooldown 2: the two metrics after a reduction are ignored, then patience counts again.
TEST(ReduceLROnPlateau, RespectsCooldown) {
  const auto optimizer = make_sgd({1.0});
  PlateauOptions options;
  options.patience = 0;
  options.cooldown = 2;
  options.factor = 0.5;
  otf::ReduceLROnPlateau schedule(*optimizer, options);
  EXPECT_EQ(metric_sequence(schedule, {1.0, 1.0, 1.0, 1.0, 1.0}),
            (std::vector<double>{1.0, 0.5, 0.5, 0.5, 0.25}));
  EXPECT_EQ(schedule.cooldown_counter(), 2);
}

TEST(ReduceLROnPlateau, StopsAtMinLrAndSkipsReductionsBelowEps) {
  const auto optimizer = make_sgd({1.0, 0.04});
  PlateauOptions options;
  options.patience = 0;
  options.min_lr = 0.05;
  otf::ReduceLROnPlateau schedule(*optimizer, options);
  schedule.step_with_metric(1.0);
  schedule.step_with_metric(1.0);
  EXPECT_EQ(optimizer_lrs(*optimizer), (std::vector<double>{1.0 * 0.1, 0.04}));  // 0.04 < min_lr
  schedule.step_with_metric(1.0);
  schedule.step_with_metric(1.0);
  EXPECT_EQ(optimizer_lrs(*optimizer), (std::vector<double>{0.05, 0.04}));

  const auto tiny = make_sgd({1e-8});
  PlateauOptions halve;
  halve.patience = 0;
  halve.factor = 0.5;
  otf::ReduceLROnPlateau tiny_schedule(*tiny, halve);
  tiny_schedule.step_with_metric(1.0);
  tiny_schedule.step_with_metric(1.0);  // 1e-8 - 5e-9 <= eps: skipped
  EXPECT_EQ(tiny_schedule.current_lr(), 1e-8);
}

TEST(ReduceLROnPlateau, RejectsBadOptions) {
  const auto optimizer = make_sgd({1.0});
  auto with = [](const std::function<void(PlateauOptions&)>& change) {
    PlateauOptions options;
    change(options);
    return options;
  };
  expect_error<std::invalid_argument>(
      [&] { otf::ReduceLROnPlateau(*optimizer, with([](auto& o) { o.factor = 1.0; })); },
      {"factor must be in (0, 1)", "got 1"});
  expect_error<std::invalid_argument>(
      [&] { otf::ReduceLROnPlateau(*optimizer, with([](auto& o) { o.patience = -1; })); },
      {"patience"});
  expect_error<std::invalid_argument>(
      [&] { otf::ReduceLROnPlateau(*optimizer, with([](auto& o) { o.cooldown = -2; })); },
      {"cooldown"});
  expect_error<std::invalid_argument>(
      [&] { otf::ReduceLROnPlateau(*optimizer, with([](auto& o) { o.min_lr = -1.0; })); },
      {"min_lr"});
}

TEST(LRScheduler, WrongKindOfStepThrowsLogicError) {
  const auto optimizer = make_sgd({1.0});
  otf::ReduceLROnPlateau plateau(*optimizer);
  expect_error<std::logic_error>([&] { plateau.step(); },
                                 {"plateau is metric-driven", "step_with_metric"});
  for (const auto kind : {LRScheduleKind::None, LRScheduleKind::Step, LRScheduleKind::Exponential,
                          LRScheduleKind::Cosine}) {
    LRScheduleSettings settings;
    if (kind == LRScheduleKind::Step) settings.step_size = 3;
    if (kind == LRScheduleKind::Exponential) settings.gamma = 0.9;
    if (kind == LRScheduleKind::Cosine) settings.t_max = 10;
    const auto schedule = otf::make_lr_scheduler(kind, *optimizer, settings);
    expect_error<std::logic_error>([&] { schedule->step_with_metric(1.0); },
                                   {"is time-based", "step()"});
  }
}

// Saves after `before` steps, records the next `after` rates, then restores the archive into a
// schedule built from scratch (with other hyperparameters) and expects the same rates bit for bit.
void expect_resume(LRScheduleKind kind, const LRScheduleSettings& settings,
                   const LRScheduleSettings& other_settings, int before, int after) {
  const std::vector<double> metrics{3.0, 2.0, 2.5, 2.5, 2.5, 1.0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5};
  auto advance = [&](LRScheduler& schedule, int count, int offset) {
    std::vector<double> lrs;
    for (int i = 0; i < count; ++i) {
      if (schedule.is_metric_driven()) {
        schedule.step_with_metric(metrics[(offset + i) % metrics.size()]);
      } else {
        schedule.step();
      }
      lrs.push_back(schedule.current_lr());
    }
    return lrs;
  };
  const auto optimizer = make_sgd({0.7, 0.03});
  const auto schedule = otf::make_lr_scheduler(kind, *optimizer, settings);
  advance(*schedule, before, 0);
  const std::vector<double> lrs_at_save = optimizer_lrs(*optimizer);
  const std::string bytes = serialized(*schedule);
  const std::vector<double> expected = advance(*schedule, after, before);

  const auto fresh_optimizer = make_sgd({0.7, 0.03});
  const auto restored = otf::make_lr_scheduler(kind, *fresh_optimizer, other_settings);
  load_into(*restored, bytes);
  EXPECT_EQ(optimizer_lrs(*fresh_optimizer), lrs_at_save) << otf::to_string(kind);
  EXPECT_EQ(restored->current_lr(), lrs_at_save.front());
  EXPECT_EQ(advance(*restored, after, before), expected) << otf::to_string(kind);
  EXPECT_EQ(optimizer_lrs(*fresh_optimizer), optimizer_lrs(*optimizer)) << otf::to_string(kind);
  // Saving again gives the same bytes' worth of state: a second round trip changes nothing.
  EXPECT_EQ(serialized(*restored), serialized(*schedule));
}

TEST(LRScheduler, SaveLoadResumesTheSameSequence) {
  LRScheduleSettings step;
  step.step_size = 2;
  step.gamma = 0.3;
  LRScheduleSettings other_step;
  other_step.step_size = 5;
  expect_resume(LRScheduleKind::Step, step, other_step, 3, 6);

  LRScheduleSettings exponential;
  exponential.gamma = 0.93;
  LRScheduleSettings other_exponential;
  other_exponential.gamma = 0.5;
  expect_resume(LRScheduleKind::Exponential, exponential, other_exponential, 4, 5);

  LRScheduleSettings cosine;
  cosine.t_max = 7;
  cosine.eta_min = 0.001;
  LRScheduleSettings other_cosine;
  other_cosine.t_max = 100;
  expect_resume(LRScheduleKind::Cosine, cosine, other_cosine, 3, 9);

  expect_resume(LRScheduleKind::None, {}, {}, 2, 2);

  LRScheduleSettings plateau;
  plateau.plateau = PlateauOptions{};
  plateau.plateau->patience = 1;
  plateau.plateau->cooldown = 1;
  plateau.plateau->factor = 0.3;
  plateau.plateau->min_lr = 0.01;
  expect_resume(LRScheduleKind::Plateau, plateau, {}, 5, 7);
}

TEST(LRScheduler, LoadRejectsAnotherKindOrGroupCount) {
  const auto optimizer = make_sgd({1.0});
  otf::StepLR step(*optimizer, 2, 0.5);
  const std::string step_bytes = serialized(step);
  otf::ExponentialLR exponential(*optimizer, 0.9);
  expect_error<std::runtime_error>([&] { load_into(exponential, step_bytes); },
                                   {"'step' learning-rate schedule", "not 'exponential'"});
  otf::ReduceLROnPlateau plateau(*optimizer);
  expect_error<std::runtime_error>([&] { load_into(plateau, step_bytes); }, {"not 'plateau'"});

  const auto two_groups = make_sgd({1.0, 2.0});
  otf::StepLR wider(*two_groups, 2, 0.5);
  expect_error<std::runtime_error>([&] { load_into(wider, step_bytes); },
                                   {"rates for 1 parameter groups", "optimizer has 2"});
}

TEST(MakeLRScheduler, BuildsEachKindWithItsDefaults) {
  const auto optimizer = make_sgd({1.0});
  LRScheduleSettings step;
  step.step_size = 1;
  const auto step_schedule = otf::make_lr_scheduler(LRScheduleKind::Step, *optimizer, step);
  ASSERT_NE(dynamic_cast<otf::StepLR*>(step_schedule.get()), nullptr);
  EXPECT_EQ(dynamic_cast<otf::StepLR&>(*step_schedule).gamma(), 0.1);  // PyTorch's default

  LRScheduleSettings cosine;
  cosine.t_max = 4;
  const auto cosine_schedule = otf::make_lr_scheduler(LRScheduleKind::Cosine, *optimizer, cosine);
  EXPECT_EQ(dynamic_cast<otf::CosineAnnealingLR&>(*cosine_schedule).eta_min(), 0.0);

  const auto plateau = otf::make_lr_scheduler(LRScheduleKind::Plateau, *optimizer);
  EXPECT_TRUE(dynamic_cast<otf::ReduceLROnPlateau&>(*plateau).options() == PlateauOptions{});

  const auto none = otf::make_lr_scheduler(LRScheduleKind::None, *optimizer);
  ASSERT_NE(dynamic_cast<otf::ConstantLR*>(none.get()), nullptr);
}

TEST(MakeLRScheduler, NamesMissingAndUnusedSettings) {
  const auto optimizer = make_sgd({1.0});
  expect_error<std::invalid_argument>(
      [&] { otf::make_lr_scheduler(LRScheduleKind::Step, *optimizer); },
      {"lr_schedule step needs step_size"});
  expect_error<std::invalid_argument>(
      [&] { otf::make_lr_scheduler(LRScheduleKind::Exponential, *optimizer); },
      {"lr_schedule exponential needs gamma"});
  expect_error<std::invalid_argument>(
      [&] { otf::make_lr_scheduler(LRScheduleKind::Cosine, *optimizer); },
      {"lr_schedule cosine needs t_max"});

  LRScheduleSettings t_max;
  t_max.t_max = 10;
  expect_error<std::invalid_argument>(
      [&] { otf::make_lr_scheduler(LRScheduleKind::Step, *optimizer, t_max); },
      {"lr_schedule step does not use t_max"});
  LRScheduleSettings gamma;
  gamma.gamma = 0.5;
  expect_error<std::invalid_argument>(
      [&] { otf::make_lr_scheduler(LRScheduleKind::Plateau, *optimizer, gamma); },
      {"lr_schedule plateau does not use gamma"});
  LRScheduleSettings plateau;
  plateau.plateau = PlateauOptions{};
  expect_error<std::invalid_argument>(
      [&] { otf::make_lr_scheduler(LRScheduleKind::None, *optimizer, plateau); },
      {"lr_schedule none does not use plateau options"});
}

}  // namespace

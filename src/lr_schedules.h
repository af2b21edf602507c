// The concrete learning-rate schedules behind otf::LRScheduler, and the factory that builds one
// from the LAMMPS fix's `lr_schedule none|step|exponential|cosine|plateau` keyword. Semantics are
// PyTorch's (torch/optim/lr_scheduler.py, 1.13); each class says which form it follows.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lr_schedule_settings.h"
#include "lr_scheduler.h"

namespace otf {


// A schedule that is a function of the number of executed optimizer steps. The learning rate of
// parameter group g after n calls to step() is lr_at(base_lr[g], n), where base_lr[g] is the
// group's learning rate when the schedule was built. This is PyTorch's closed form
// (_get_closed_form_lr, what PyTorch uses when step(epoch) is given), not its recursive get_lr():
// the value after n steps then does not depend on accumulated rounding, a resume needs only n and
// the base rates, and it is the textbook formula the tests check. The difference from PyTorch's
// recursive form is a few ulp at most for these schedules, and only if no one else writes the
// optimizer's learning rates (the closed form overwrites them; the recursive form would chain).
class TimeBasedLRSchedule : public LRScheduler {
 public:
  // Sets every parameter group's learning rate to lr_at(base_lr, step_count() + 1).
  // Throws std::logic_error if the optimizer's number of parameter groups has changed.
  void step() final;
  // Throws std::logic_error: time-based schedules take no metric.
  void step_with_metric(double metric) final;
  double current_lr() const final { return last_lrs_.front(); }
  // Every group's learning rate as the schedule last set it (PyTorch's get_last_lr()).
  const std::vector<double>& last_lrs() const { return last_lrs_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t step_count() const { return step_count_; }

  // The state is the kind, the step count, the base rates and the hyperparameters (as PyTorch's
  // state_dict, which holds every attribute but the optimizer). load() restores all of them,
  // so the archived hyperparameters win over the constructor's, and writes the restored
  // schedule's learning rates into the optimizer, so that a schedule loaded onto a freshly built
  // optimizer resumes exactly. Throws std::runtime_error if the archive holds another kind of
  // schedule or another number of parameter groups. Give each schedule its own archive (or
  // nested archive): the keys are plain names.
  void save(torch::serialize::OutputArchive& archive) const final;
  void load(torch::serialize::InputArchive& archive) final;

  // The closed form: the learning rate of a group with base rate `base_lr` after `step` steps.
  virtual double lr_at(double base_lr, int64_t step) const = 0;
  virtual LRScheduleKind kind() const = 0;

 protected:
  explicit TimeBasedLRSchedule(torch::optim::Optimizer& optimizer);
  virtual void save_hyperparameters(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load_hyperparameters(torch::serialize::InputArchive& archive) = 0;

 private:
  void apply_lrs_for_step_count();

  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t step_count_ = 0;
};

// `lr_schedule none`: every group keeps the learning rate it had when the schedule was built.
class ConstantLR final : public TimeBasedLRSchedule {
 public:
  explicit ConstantLR(torch::optim::Optimizer& optimizer);
  double lr_at(double base_lr, int64_t step) const override;
  LRScheduleKind kind() const override { return LRScheduleKind::None; }

 protected:
  void save_hyperparameters(torch::serialize::OutputArchive& archive) const override;
  void load_hyperparameters(torch::serialize::InputArchive& archive) override;
};

// PyTorch's StepLR: base_lr * gamma^floor(n / step_size).
class StepLR final : public TimeBasedLRSchedule {
 public:
  // Throws std::invalid_argument unless step_size >= 1 and gamma is finite and > 0.
  StepLR(torch::optim::Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(double base_lr, int64_t step) const override;
  LRScheduleKind kind() const override { return LRScheduleKind::Step; }
  int64_t step_size() const { return step_size_; }
  double gamma() const { return gamma_; }

 protected:
  void save_hyperparameters(torch::serialize::OutputArchive& archive) const override;
  void load_hyperparameters(torch::serialize::InputArchive& archive) override;

 private:
  int64_t step_size_;
  double gamma_;
};

// PyTorch's ExponentialLR: base_lr * gamma^n.
class ExponentialLR final : public TimeBasedLRSchedule {
 public:
  // Throws std::invalid_argument unless gamma is finite and > 0.
  ExponentialLR(torch::optim::Optimizer& optimizer, double gamma);
  double lr_at(double base_lr, int64_t step) const override;
  LRScheduleKind kind() const override { return LRScheduleKind::Exponential; }
  double gamma() const { return gamma_; }

 protected:
  void save_hyperparameters(torch::serialize::OutputArchive& archive) const override;
  void load_hyperparameters(torch::serialize::InputArchive& archive) override;

 private:
  double gamma_;
};

// PyTorch's CosineAnnealingLR in its closed form (the SGDR formula of Loshchilov & Hutter without
// restarts): eta_min + (base_lr - eta_min) * (1 + cos(pi * n / t_max)) / 2, evaluated in that
// order. Past t_max it follows the same cosine back up (period 2 t_max), as PyTorch does.
class CosineAnnealingLR final : public TimeBasedLRSchedule {
 public:
  // Throws std::invalid_argument unless t_max >= 1 and eta_min is finite and >= 0.
  CosineAnnealingLR(torch::optim::Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  double lr_at(double base_lr, int64_t step) const override;
  LRScheduleKind kind() const override { return LRScheduleKind::Cosine; }
  int64_t t_max() const { return t_max_; }
  double eta_min() const { return eta_min_; }

 protected:
  void save_hyperparameters(torch::serialize::OutputArchive& archive) const override;
  void load_hyperparameters(torch::serialize::InputArchive& archive) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// PyTorch's ReduceLROnPlateau, step for step: a metric is better than the best so far if
// (min, relative) metric < best * (1 - threshold), (min, absolute) metric < best - threshold,
// (max, relative) metric > best * (1 + threshold), (max, absolute) metric > best + threshold.
// A better metric becomes the best and clears the bad count; otherwise the bad count grows (NaN
// is never better). During cooldown the bad count is cleared. When it exceeds patience, every
// group's lr becomes max(lr * factor, min_lr) unless that changes it by eps or less, the cooldown
// starts and the bad count is cleared. It reads the optimizer's current rates (recursive form).
class ReduceLROnPlateau final : public LRScheduler {
 public:
  // Throws std::invalid_argument unless 0 < factor < 1 (PyTorch: "Factor should be < 1.0."),
  // patience, cooldown >= 0, and threshold, min_lr, eps are finite and >= 0.
  explicit ReduceLROnPlateau(torch::optim::Optimizer& optimizer, PlateauOptions options = {});

  bool is_metric_driven() const override { return true; }
  // Throws std::logic_error: this schedule steps only with a validation metric.
  void step() override;
  void step_with_metric(double metric) override;
  double current_lr() const override { return last_lrs_.front(); }
  const std::vector<double>& last_lrs() const { return last_lrs_; }

  const PlateauOptions& options() const { return options_; }
  double best() const { return best_; }
  int64_t num_bad_metrics() const { return num_bad_metrics_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t step_count() const { return step_count_; }

  // As TimeBasedLRSchedule: options, counters, best metric and the last rates are saved; load()
  // restores them and writes the rates into the optimizer's groups.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  bool is_better(double metric) const;
  void reduce_lrs();

  torch::optim::Optimizer& optimizer_;
  PlateauOptions options_;
  double best_;
  int64_t num_bad_metrics_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t step_count_ = 0;
  std::vector<double> last_lrs_;
};

// What make_lr_scheduler needs for each kind. A setting the chosen kind does not use must stay
// unset, so that a misplaced keyword is reported rather than ignored.

// Builds the schedule for `kind` over `optimizer`, which must outlive it. `none` gives a
// ConstantLR, so callers never hold a null schedule. Throws std::invalid_argument naming a
// missing required setting, a setting the kind does not use, or a bad value.
std::unique_ptr<LRScheduler> make_lr_scheduler(LRScheduleKind kind,
                                               torch::optim::Optimizer& optimizer,
                                               const LRScheduleSettings& settings = {});

}  // namespace otf

#include "lr_schedules.h"

#include "keywords.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace otf {
namespace {

constexpr KeywordTable<LRScheduleKind, 5> kNames{{
    {"none", LRScheduleKind::None},
    {"step", LRScheduleKind::Step},
    {"exponential", LRScheduleKind::Exponential},
    {"cosine", LRScheduleKind::Cosine},
    {"plateau", LRScheduleKind::Plateau},
}};

constexpr double kPi = 3.14159265358979323846;  // Python's math.pi, the same double

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

bool is_positive_finite(double value) { return std::isfinite(value) && value > 0.0; }
bool is_non_negative_finite(double value) { return std::isfinite(value) && value >= 0.0; }

std::vector<double> group_lrs(const torch::optim::Optimizer& optimizer) {
  std::vector<double> lrs;
  lrs.reserve(optimizer.param_groups().size());
  for (const auto& group : optimizer.param_groups()) lrs.push_back(group.options().get_lr());
  return lrs;
}

std::vector<double> initial_group_lrs(const torch::optim::Optimizer& optimizer) {
  if (optimizer.param_groups().empty()) {
    throw std::invalid_argument("learning-rate schedule: the optimizer has no parameter groups");
  }
  return group_lrs(optimizer);
}

void check_group_count(const torch::optim::Optimizer& optimizer, size_t expected) {
  const size_t actual = optimizer.param_groups().size();
  if (actual != expected) {
    throw std::logic_error("learning-rate schedule: the optimizer has " + std::to_string(actual) +
                           " parameter groups but the schedule holds rates for " +
                           std::to_string(expected) +
                           " (build the schedule after adding every parameter group)");
  }
}

void set_group_lrs(torch::optim::Optimizer& optimizer, const std::vector<double>& lrs) {
  check_group_count(optimizer, lrs.size());
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(lrs[g]);
}

// Archive entries are float64/int64 tensors, which serialise bit for bit (inf and NaN included).
const torch::TensorOptions kDoubleOptions = torch::TensorOptions().dtype(torch::kDouble);
const torch::TensorOptions kLongOptions = torch::TensorOptions().dtype(torch::kLong);

void write_double(torch::serialize::OutputArchive& archive, const std::string& key, double value) {
  archive.write(key, torch::full({}, value, kDoubleOptions));
}

void write_int(torch::serialize::OutputArchive& archive, const std::string& key, int64_t value) {
  archive.write(key, torch::full({}, value, kLongOptions));
}

void write_doubles(torch::serialize::OutputArchive& archive, const std::string& key,
                   const std::vector<double>& values) {
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(values.size())}, kDoubleOptions);
  std::copy(values.begin(), values.end(), tensor.data_ptr<double>());
  archive.write(key, tensor);
}

torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                          c10::ScalarType dtype) {
  torch::Tensor tensor;
  if (!archive.try_read(key, tensor)) {
    throw std::runtime_error("learning-rate schedule archive has no entry '" + key + "'");
  }
  if (tensor.scalar_type() != dtype) {
    throw std::runtime_error("learning-rate schedule archive entry '" + key + "' has dtype " +
                             std::string(c10::toString(tensor.scalar_type())) + ", expected " +
                             std::string(c10::toString(dtype)));
  }
  return tensor.contiguous();
}

double read_double(torch::serialize::InputArchive& archive, const std::string& key) {
  return read_tensor(archive, key, torch::kDouble).item<double>();
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  return read_tensor(archive, key, torch::kLong).item<int64_t>();
}

std::vector<double> read_doubles(torch::serialize::InputArchive& archive, const std::string& key) {
  const torch::Tensor tensor = read_tensor(archive, key, torch::kDouble);
  const double* data = tensor.data_ptr<double>();
  return std::vector<double>(data, data + tensor.numel());
}

void write_kind(torch::serialize::OutputArchive& archive, LRScheduleKind kind) {
  archive.write("kind", c10::IValue(to_string(kind)));
}

void check_kind(torch::serialize::InputArchive& archive, LRScheduleKind expected) {
  c10::IValue stored;
  if (!archive.try_read("kind", stored) || !stored.isString()) {
    throw std::runtime_error("archive holds no learning-rate schedule (no 'kind' entry)");
  }
  if (stored.toStringRef() != to_string(expected)) {
    throw std::runtime_error("archive holds a '" + stored.toStringRef() +
                             "' learning-rate schedule, not '" + to_string(expected) + "'");
  }
}

void check_archived_group_count(const torch::optim::Optimizer& optimizer, size_t archived) {
  if (optimizer.param_groups().size() != archived) {
    throw std::runtime_error("learning-rate schedule archive holds rates for " +
                             std::to_string(archived) + " parameter groups but the optimizer has " +
                             std::to_string(optimizer.param_groups().size()));
  }
}

void check_step_settings(int64_t step_size, double gamma) {
  require(step_size >= 1,
          "lr_schedule step: step_size must be >= 1 (got " + std::to_string(step_size) + ")");
  require(is_positive_finite(gamma),
          "lr_schedule step: gamma must be finite and > 0 (got " + format_number(gamma) + ")");
}

void check_exponential_settings(double gamma) {
  require(is_positive_finite(gamma), "lr_schedule exponential: gamma must be finite and > 0 (got " +
                                         format_number(gamma) + ")");
}

void check_cosine_settings(int64_t t_max, double eta_min) {
  require(t_max >= 1, "lr_schedule cosine: t_max must be >= 1 (got " + std::to_string(t_max) + ")");
  require(is_non_negative_finite(eta_min),
          "lr_schedule cosine: eta_min must be finite and >= 0 "
          "(got " +
              format_number(eta_min) + ")");
}

void check_plateau_options(const PlateauOptions& options) {
  const std::string prefix = "lr_schedule plateau: ";
  require(options.factor > 0.0 && options.factor < 1.0,
          prefix + "factor must be in (0, 1) (got " + format_number(options.factor) + ")");
  require(options.patience >= 0,
          prefix + "patience must be >= 0 (got " + std::to_string(options.patience) + ")");
  require(options.cooldown >= 0,
          prefix + "cooldown must be >= 0 (got " + std::to_string(options.cooldown) + ")");
  require(
      is_non_negative_finite(options.threshold),
      prefix + "threshold must be finite and >= 0 (got " + format_number(options.threshold) + ")");
  require(is_non_negative_finite(options.min_lr),
          prefix + "min_lr must be finite and >= 0 (got " + format_number(options.min_lr) + ")");
  require(is_non_negative_finite(options.eps),
          prefix + "eps must be finite and >= 0 (got " + format_number(options.eps) + ")");
}

// PyTorch's ReduceLROnPlateau._init_is_better: mode_worse.
double worst_metric(PlateauOptions::Mode mode) {
  const double inf = std::numeric_limits<double>::infinity();
  return mode == PlateauOptions::Mode::Min ? inf : -inf;
}

}  // namespace

LRScheduleKind parse_lr_schedule_kind(std::string_view text) {
  return parse_keyword(kNames, text, "learning-rate schedule",
                       "accepted: none, step, exponential, cosine, plateau; any case");
}

std::string to_string(LRScheduleKind kind) {
  return keyword_spelling(kNames, kind, "LRScheduleKind");
}

std::ostream& operator<<(std::ostream& out, LRScheduleKind kind) { return out << to_string(kind); }

// ---- TimeBasedLRSchedule ------------------------------------------------------------------------

TimeBasedLRSchedule::TimeBasedLRSchedule(torch::optim::Optimizer& optimizer)
    : optimizer_(optimizer), base_lrs_(initial_group_lrs(optimizer)), last_lrs_(base_lrs_) {}

void TimeBasedLRSchedule::step() {
  check_group_count(optimizer_, base_lrs_.size());
  ++step_count_;
  apply_lrs_for_step_count();
}

void TimeBasedLRSchedule::step_with_metric(double /*metric*/) {
  throw std::logic_error("lr_schedule " + to_string(kind()) +
                         " is time-based: call step() once per executed optimizer step, not "
                         "step_with_metric()");
}

void TimeBasedLRSchedule::apply_lrs_for_step_count() {
  std::vector<double> lrs;
  lrs.reserve(base_lrs_.size());
  for (const double base_lr : base_lrs_) lrs.push_back(lr_at(base_lr, step_count_));
  set_group_lrs(optimizer_, lrs);
  last_lrs_ = std::move(lrs);
}

void TimeBasedLRSchedule::save(torch::serialize::OutputArchive& archive) const {
  write_kind(archive, kind());
  write_int(archive, "step_count", step_count_);
  write_doubles(archive, "base_lrs", base_lrs_);
  save_hyperparameters(archive);
}

void TimeBasedLRSchedule::load(torch::serialize::InputArchive& archive) {
  check_kind(archive, kind());
  const int64_t step_count = read_int(archive, "step_count");
  std::vector<double> base_lrs = read_doubles(archive, "base_lrs");
  check_archived_group_count(optimizer_, base_lrs.size());
  load_hyperparameters(archive);
  step_count_ = step_count;
  base_lrs_ = std::move(base_lrs);
  apply_lrs_for_step_count();
}

// ---- ConstantLR ---------------------------------------------------------------------------------

ConstantLR::ConstantLR(torch::optim::Optimizer& optimizer) : TimeBasedLRSchedule(optimizer) {}

double ConstantLR::lr_at(double base_lr, int64_t /*step*/) const { return base_lr; }

void ConstantLR::save_hyperparameters(torch::serialize::OutputArchive& /*archive*/) const {}

void ConstantLR::load_hyperparameters(torch::serialize::InputArchive& /*archive*/) {}

// ---- StepLR -------------------------------------------------------------------------------------

StepLR::StepLR(torch::optim::Optimizer& optimizer, int64_t step_size, double gamma)
    : TimeBasedLRSchedule(optimizer), step_size_(step_size), gamma_(gamma) {
  check_step_settings(step_size_, gamma_);
}

// PyTorch: base_lr * self.gamma ** (self.last_epoch // self.step_size); Python's float ** int is
// C's pow on doubles.
double StepLR::lr_at(double base_lr, int64_t step) const {
  return base_lr * std::pow(gamma_, static_cast<double>(step / step_size_));
}

void StepLR::save_hyperparameters(torch::serialize::OutputArchive& archive) const {
  write_int(archive, "step_size", step_size_);
  write_double(archive, "gamma", gamma_);
}

void StepLR::load_hyperparameters(torch::serialize::InputArchive& archive) {
  const int64_t step_size = read_int(archive, "step_size");
  const double gamma = read_double(archive, "gamma");
  check_step_settings(step_size, gamma);
  step_size_ = step_size;
  gamma_ = gamma;
}

// ---- ExponentialLR ------------------------------------------------------------------------------

ExponentialLR::ExponentialLR(torch::optim::Optimizer& optimizer, double gamma)
    : TimeBasedLRSchedule(optimizer), gamma_(gamma) {
  check_exponential_settings(gamma_);
}

// PyTorch: base_lr * self.gamma ** self.last_epoch.
double ExponentialLR::lr_at(double base_lr, int64_t step) const {
  return base_lr * std::pow(gamma_, static_cast<double>(step));
}

void ExponentialLR::save_hyperparameters(torch::serialize::OutputArchive& archive) const {
  write_double(archive, "gamma", gamma_);
}

void ExponentialLR::load_hyperparameters(torch::serialize::InputArchive& archive) {
  const double gamma = read_double(archive, "gamma");
  check_exponential_settings(gamma);
  gamma_ = gamma;
}

// ---- CosineAnnealingLR --------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(torch::optim::Optimizer& optimizer, int64_t t_max,
                                     double eta_min)
    : TimeBasedLRSchedule(optimizer), t_max_(t_max), eta_min_(eta_min) {
  check_cosine_settings(t_max_, eta_min_);
}

// PyTorch: eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max))
// / 2, same operation order.
double CosineAnnealingLR::lr_at(double base_lr, int64_t step) const {
  return eta_min_ +
         (base_lr - eta_min_) *
             (1.0 + std::cos(kPi * static_cast<double>(step) / static_cast<double>(t_max_))) / 2.0;
}

void CosineAnnealingLR::save_hyperparameters(torch::serialize::OutputArchive& archive) const {
  write_int(archive, "t_max", t_max_);
  write_double(archive, "eta_min", eta_min_);
}

void CosineAnnealingLR::load_hyperparameters(torch::serialize::InputArchive& archive) {
  const int64_t t_max = read_int(archive, "t_max");
  const double eta_min = read_double(archive, "eta_min");
  check_cosine_settings(t_max, eta_min);
  t_max_ = t_max;
  eta_min_ = eta_min;
}

// ---- ReduceLROnPlateau --------------------------------------------------------------------------

bool operator==(const PlateauOptions& a, const PlateauOptions& b) {
  return a.mode == b.mode && a.factor == b.factor && a.patience == b.patience &&
         a.threshold == b.threshold && a.threshold_mode == b.threshold_mode &&
         a.cooldown == b.cooldown && a.min_lr == b.min_lr && a.eps == b.eps;
}

ReduceLROnPlateau::ReduceLROnPlateau(torch::optim::Optimizer& optimizer, PlateauOptions options)
    : optimizer_(optimizer),
      options_(options),
      best_(worst_metric(options.mode)),
      last_lrs_(initial_group_lrs(optimizer)) {
  check_plateau_options(options_);
}

void ReduceLROnPlateau::step() {
  throw std::logic_error(
      "lr_schedule plateau is metric-driven: call step_with_metric(validation_metric) after a "
      "validation pass, not step()");
}

// PyTorch's ReduceLROnPlateau.step(metrics), line for line.
void ReduceLROnPlateau::step_with_metric(double metric) {
  check_group_count(optimizer_, last_lrs_.size());
  ++step_count_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_metrics_ = 0;
  } else {
    ++num_bad_metrics_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_metrics_ = 0;  // PyTorch: "ignore any bad epochs in cooldown"
  }
  if (num_bad_metrics_ > options_.patience) {
    reduce_lrs();
    cooldown_counter_ = options_.cooldown;
    num_bad_metrics_ = 0;
  }
  last_lrs_ = group_lrs(optimizer_);
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const bool relative = options_.threshold_mode == PlateauOptions::ThresholdMode::Relative;
  if (options_.mode == PlateauOptions::Mode::Min) {
    return relative ? metric < best_ * (1.0 - options_.threshold)
                    : metric < best_ - options_.threshold;
  }
  return relative ? metric > best_ * (options_.threshold + 1.0)
                  : metric > best_ + options_.threshold;
}

// PyTorch's _reduce_lr: reductions of eps or less are skipped, so a rate at min_lr stays put.
void ReduceLROnPlateau::reduce_lrs() {
  for (auto& group : optimizer_.param_groups()) {
    const double old_lr = group.options().get_lr();
    const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
    if (old_lr - new_lr > options_.eps) group.options().set_lr(new_lr);
  }
}

void ReduceLROnPlateau::save(torch::serialize::OutputArchive& archive) const {
  write_kind(archive, LRScheduleKind::Plateau);
  write_int(archive, "mode", options_.mode == PlateauOptions::Mode::Min ? 0 : 1);
  write_double(archive, "factor", options_.factor);
  write_int(archive, "patience", options_.patience);
  write_double(archive, "threshold", options_.threshold);
  write_int(archive, "threshold_mode",
            options_.threshold_mode == PlateauOptions::ThresholdMode::Relative ? 0 : 1);
  write_int(archive, "cooldown", options_.cooldown);
  write_double(archive, "min_lr", options_.min_lr);
  write_double(archive, "eps", options_.eps);
  write_double(archive, "best", best_);
  write_int(archive, "num_bad_metrics", num_bad_metrics_);
  write_int(archive, "cooldown_counter", cooldown_counter_);
  write_int(archive, "step_count", step_count_);
  write_doubles(archive, "last_lrs", last_lrs_);
}

void ReduceLROnPlateau::load(torch::serialize::InputArchive& archive) {
  check_kind(archive, LRScheduleKind::Plateau);
  PlateauOptions options;
  options.mode =
      read_int(archive, "mode") == 0 ? PlateauOptions::Mode::Min : PlateauOptions::Mode::Max;
  options.factor = read_double(archive, "factor");
  options.patience = read_int(archive, "patience");
  options.threshold = read_double(archive, "threshold");
  options.threshold_mode = read_int(archive, "threshold_mode") == 0
                               ? PlateauOptions::ThresholdMode::Relative
                               : PlateauOptions::ThresholdMode::Absolute;
  options.cooldown = read_int(archive, "cooldown");
  options.min_lr = read_double(archive, "min_lr");
  options.eps = read_double(archive, "eps");
  check_plateau_options(options);
  const double best = read_double(archive, "best");
  const int64_t num_bad_metrics = read_int(archive, "num_bad_metrics");
  const int64_t cooldown_counter = read_int(archive, "cooldown_counter");
  const int64_t step_count = read_int(archive, "step_count");
  std::vector<double> last_lrs = read_doubles(archive, "last_lrs");
  check_archived_group_count(optimizer_, last_lrs.size());

  options_ = options;
  best_ = best;
  num_bad_metrics_ = num_bad_metrics;
  cooldown_counter_ = cooldown_counter;
  step_count_ = step_count;
  last_lrs_ = std::move(last_lrs);
  set_group_lrs(optimizer_, last_lrs_);
}

// ---- factory ------------------------------------------------------------------------------------

std::unique_ptr<LRScheduler> make_lr_scheduler(LRScheduleKind kind,
                                               torch::optim::Optimizer& optimizer,
                                               const LRScheduleSettings& settings) {
  const std::string name = to_string(kind);
  auto reject_unused = [&](bool is_set, const char* setting, const char* users) {
    if (is_set) {
      throw std::invalid_argument("lr_schedule " + name + " does not use " + setting +
                                  " (a setting of " + users + ")");
    }
  };
  auto required = [&](bool is_set, const char* setting) {
    if (!is_set) {
      throw std::invalid_argument("lr_schedule " + name + " needs " + setting);
    }
  };
  const bool uses_step_size = kind == LRScheduleKind::Step;
  const bool uses_gamma = kind == LRScheduleKind::Step || kind == LRScheduleKind::Exponential;
  const bool uses_cosine = kind == LRScheduleKind::Cosine;
  const bool uses_plateau = kind == LRScheduleKind::Plateau;
  if (!uses_step_size) reject_unused(settings.step_size.has_value(), "step_size", "step");
  if (!uses_gamma) reject_unused(settings.gamma.has_value(), "gamma", "step, exponential");
  if (!uses_cosine) {
    reject_unused(settings.t_max.has_value(), "t_max", "cosine");
    reject_unused(settings.eta_min.has_value(), "eta_min", "cosine");
  }
  if (!uses_plateau) reject_unused(settings.plateau.has_value(), "plateau options", "plateau");

  switch (kind) {
    case LRScheduleKind::None:
      return std::make_unique<ConstantLR>(optimizer);
    case LRScheduleKind::Step:
      required(settings.step_size.has_value(), "step_size");
      return std::make_unique<StepLR>(optimizer, *settings.step_size, settings.gamma.value_or(0.1));
    case LRScheduleKind::Exponential:
      required(settings.gamma.has_value(), "gamma");
      return std::make_unique<ExponentialLR>(optimizer, *settings.gamma);
    case LRScheduleKind::Cosine:
      required(settings.t_max.has_value(), "t_max");
      return std::make_unique<CosineAnnealingLR>(optimizer, *settings.t_max,
                                                 settings.eta_min.value_or(0.0));
    case LRScheduleKind::Plateau:
      return std::make_unique<ReduceLROnPlateau>(optimizer,
                                                 settings.plateau.value_or(PlateauOptions{}));
  }
  throw std::invalid_argument("invalid LRScheduleKind value " +
                              std::to_string(static_cast<int>(kind)));
}

namespace {

bool is_whole_number(double value, double least) {
  return value >= least && value == std::floor(value) && value < 9.0e15;
}

}  // namespace

LRScheduleSettings lr_schedule_settings_from_values(LRScheduleKind kind,
                                                    const std::vector<double>& values) {
  auto expect = [&values](std::size_t least, std::size_t most, const std::string& usage) {
    if (values.size() < least || values.size() > most)
      throw std::invalid_argument("lr_schedule " + usage + " (got " +
                                  std::to_string(values.size()) + " value(s))");
  };
  auto whole = [](double value, const std::string& what) {
    if (!is_whole_number(value, 1.0))
      throw std::invalid_argument("lr_schedule: " + what + " must be a whole number >= 1");
    return static_cast<int64_t>(value);
  };
  LRScheduleSettings settings;
  switch (kind) {
    case LRScheduleKind::None:
      expect(0, 0, "none takes no values");
      break;
    case LRScheduleKind::Step:
      expect(2, 2, "step needs <steps> <gamma>");
      settings.step_size = whole(values[0], "the step schedule's <steps>");
      settings.gamma = values[1];
      break;
    case LRScheduleKind::Exponential:
      expect(1, 1, "exponential needs <gamma>");
      settings.gamma = values[0];
      break;
    case LRScheduleKind::Cosine:
      expect(1, 2, "cosine needs <steps> [<lr_min>]");
      settings.t_max = whole(values[0], "the cosine schedule's <steps>");
      if (values.size() > 1) settings.eta_min = values[1];
      break;
    case LRScheduleKind::Plateau: {
      expect(2, 3, "plateau needs <factor> <patience> [<lr_min>]");
      PlateauOptions plateau;
      plateau.factor = values[0];
      if (!is_whole_number(values[1], 0.0))
        throw std::invalid_argument("lr_schedule: the plateau schedule's <patience> must be a "
                                    "whole number >= 0");
      plateau.patience = static_cast<int64_t>(values[1]);
      if (values.size() > 2) plateau.min_lr = values[2];
      settings.plateau = plateau;
      break;
    }
  }
  return settings;
}

void check_lr_schedule(LRScheduleKind kind, const LRScheduleSettings& settings) {
  // The schedules check their values when they are built: build one on a throwaway optimizer.
  torch::Tensor probe = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD probe_optimizer({probe}, torch::optim::SGDOptions(1.0));
  make_lr_scheduler(kind, probe_optimizer, settings);
}

}  // namespace otf

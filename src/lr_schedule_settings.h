// Which learning-rate schedule a training run uses and its numbers (`lr_schedule <kind> <values>`),
// apart from LibTorch so that the settings the LAMMPS styles hold can carry them; lr_schedules.h
// builds the schedules. The schedules own these rules: the keyword's values are mapped and checked
// here, once.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace otf {

enum class LRScheduleKind { None, Step, Exponential, Cosine, Plateau };

// Accepts "none", "step", "exponential", "cosine", "plateau" in any letter case with surrounding
// whitespace; throws std::invalid_argument naming the bad value and listing the accepted ones.
LRScheduleKind parse_lr_schedule_kind(std::string_view text);
// The canonical keyword: parse_lr_schedule_kind(to_string(k)) == k.
std::string to_string(LRScheduleKind kind);
std::ostream& operator<<(std::ostream& out, LRScheduleKind kind);

// PyTorch's ReduceLROnPlateau options, with its defaults.
struct PlateauOptions {
  enum class Mode { Min, Max };  // is a smaller or a larger metric better
  enum class ThresholdMode { Relative, Absolute };
  Mode mode = Mode::Min;
  double factor = 0.1;    // new_lr = max(lr * factor, min_lr)
  int64_t patience = 10;  // non-improving metrics tolerated; the next one reduces
  double threshold = 1e-4;
  ThresholdMode threshold_mode = ThresholdMode::Relative;
  int64_t cooldown = 0;  // metrics ignored after a reduction
  double min_lr = 0.0;   // for every group
  double eps = 1e-8;     // reductions of eps or less are skipped

  friend bool operator==(const PlateauOptions& a, const PlateauOptions& b);
  friend bool operator!=(const PlateauOptions& a, const PlateauOptions& b) { return !(a == b); }
};

struct LRScheduleSettings {
  std::optional<int64_t> step_size;       // step: required
  std::optional<double> gamma;            // step: default 0.1 (PyTorch); exponential: required
  std::optional<int64_t> t_max;           // cosine: required, in optimizer steps
  std::optional<double> eta_min;          // cosine: default 0
  std::optional<PlateauOptions> plateau;  // plateau: default PlateauOptions{}
};

// The values of `lr_schedule <kind> <values...>` as settings: step <steps> <gamma>, exponential
// <gamma>, cosine <steps> [<lr_min>], plateau <factor> <patience> [<lr_min>], none. Throws
// std::invalid_argument naming the usage for a wrong count or a step count that is not a whole
// number.
LRScheduleSettings lr_schedule_settings_from_values(LRScheduleKind kind,
                                                    const std::vector<double>& values);

// Throws std::invalid_argument when make_lr_scheduler would reject these settings (a missing or
// unused setting, or a value its schedule refuses), with the schedule's own message; so that a
// bad value fails when the settings are read, not when training starts.
void check_lr_schedule(LRScheduleKind kind, const LRScheduleSettings& settings);

}  // namespace otf

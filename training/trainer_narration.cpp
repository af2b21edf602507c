#include "trainer_narration.h"

#include <cstdio>

#include "drive_criterion.h"
#include "error_calibration.h"
#include "keywords.h"
#include "on_the_fly_trainer.h"

namespace otf {
namespace {

std::string formatted(const char* format, double a, double b = 0.0, double c = 0.0,
                      double d = 0.0) {
  char text[256];
  std::snprintf(text, sizeof(text), format, a, b, c, d);
  return text;
}

}  // namespace

std::string trainer_settings_line(const TrainerSettings& settings, const DriveCriterion* criterion,
                                  const std::string& reference, double model_cutoff,
                                  const std::string& device) {
  const TrainingSessionSettings& s = settings.session;
  std::string drive = "drive " + to_string(settings.policy.mode);
  if (criterion) drive += " " + criterion->describe();
  const std::string head = "reference " + reference + ", model cutoff " + format_number(model_cutoff);
  const std::string labels =
      "label every " + std::to_string(settings.policy.label_every) + " steps" +
      (settings.label_wait ? "" : " (the MD goes on while the reference computes a label the model's "
                                  "driving asked for: label_wait no)");
  // A closed-form fit has no optimizer steps, batches or autocast region: say what it does.
  const std::string learning =
      settings.policy.learner_fits_each_label
          ? head + ", " + drive + ", " + labels + ", " +
                (s.steps_per_frame > 0 ? "fitted in closed form to every label in float64 "
                                         "(precision, batch and lr are for gradient-trained models)"
                                       : "not fitted (steps_per_frame 0)")
          : head + ", precision " + to_string(s.precision) + ", " + drive + ", " + labels + ", " +
                std::to_string(s.steps_per_frame) + " optimizer step(s) of " +
                std::to_string(s.batch_frames) + " frame(s) per frame";
  return learning + ", buffer " +
         std::to_string(s.buffer_frames) + " frames, device " + device +
         (settings.journal_path.empty() ? std::string()
                                        : ", label journal " + settings.journal_path);
}

std::string statistics_frozen_line(int64_t step, const StatisticsSummary& s) {
  std::string line = "step " + std::to_string(step) + ": descriptor statistics and energy shifts "
                     "from " + std::to_string(s.frames) + " labelled frames";
  if (s.frames > s.frames_asked && s.last_spread_ratio <= s.last_limit)
    line += formatted(" (stats_frames %.0f, and on until the descriptors stopped widening: the "
                      "last frame spread %.3g x as wide as those before it)",
                      static_cast<double>(s.frames_asked), s.last_spread_ratio);
  else if (s.frames > s.frames_asked)
    line += formatted(" (the limit, for stats_frames %.0f; the descriptors were still widening: "
                      "the last frame spread %.3g x as wide as those before it)",
                      static_cast<double>(s.frames_asked), s.last_spread_ratio);
  return line + "; training starts";
}

std::string frame_parts_line(int ranks, const long long low[2], const long long high[2],
                             const long long sum[2]) {
  return "frame parts of the last labelled frame on " + std::to_string(ranks) +
         " rank(s): centres evaluated per rank " + std::to_string(low[0]) + " to " +
         std::to_string(high[0]) +
         formatted(" (mean %.1f), atoms per rank with their ghost shell ",
                   sum[0] / static_cast<double>(ranks)) +
         std::to_string(low[1]) + " to " + std::to_string(high[1]) +
         formatted(" (mean %.1f)", sum[1] / static_cast<double>(ranks));
}

std::string calibration_summary_line(const ErrorCalibration& calibration) {
  return formatted("calibration over the last %.0f labels (each predicted before it was learned): "
                   "force error = %.4g x committee spread, 90%% bound %.4g x spread (the "
                   "window's %.3g quantile), ",
                   static_cast<double>(calibration.samples()), calibration.force_scale(),
                   calibration.force_bound90_factor(), calibration.bound_level()) +
         formatted("Spearman rank correlation of spread and error %.3g; energy error = %.4g x "
                   "spread",
                   calibration.force_rank_correlation(), calibration.energy_scale());
}

LearningLogRow learning_log_row(int64_t step, const char* event, bool reference_drives,
                                const TrainingReport& report, const TrainerCounters& counters,
                                double learning_rate, double checked_value,
                                double calibration_scale) {
  LearningLogRow row;
  row.step = step;
  row.event = event;
  row.reference_drives = reference_drives;
  row.reference_calls = counters.reference_calls;
  row.loss = report.last_loss;
  row.energy_rmse_per_atom = report.energy_rmse_per_atom;
  row.force_rmse = report.force_rmse;
  row.stress_rmse = report.stress_rmse;
  row.max_force_uncertainty = counters.max_uncertainty;
  row.loss_scale = report.loss_scale;
  row.skipped_steps = report.skipped_steps;
  row.optimizer_steps = report.optimizer_steps;
  row.buffer_frames = report.buffer_frames;
  row.skipped_labels = counters.skipped_labels;
  row.learning_rate = learning_rate;
  row.reference_seconds = counters.reference_seconds;
  row.training_seconds = counters.training_seconds;
  row.predicted_force_error = checked_value;
  row.predicted_energy_error = counters.predicted_energy_error;
  row.label_force_error = counters.label_force_error;
  row.label_energy_error = counters.label_energy_error;
  row.calibration_scale = calibration_scale;
  row.atoms_above_bound = std::string(event) == "label" ? counters.label_atoms_above_bound : -1.0;
  return row;
}

}  // namespace otf

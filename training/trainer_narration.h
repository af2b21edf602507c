// What the on-the-fly trainer tells the user: the lines of the LAMMPS log (its settings, where the
// descriptor statistics came from, how frames were split over ranks, the error calibration) and
// the rows of the CSV learning log (learning_log.h). Pure text from numbers, kept apart from the
// trainer's decisions. No LibTorch or LAMMPS types.
#pragma once

#include <cstdint>
#include <string>

#include "learning_log.h"

namespace otf {

class DriveCriterion;
class ErrorCalibration;
struct StatisticsSummary;
struct TrainerCounters;
struct TrainerSettings;
struct TrainingReport;

// "reference <r>, model cutoff <c>, precision <p>, drive <...>, label every ..., device <d>[, label
// journal <j>]": what this training run does, once at its start.
std::string trainer_settings_line(const TrainerSettings& settings, const DriveCriterion* criterion,
                                  const std::string& reference, double model_cutoff,
                                  const std::string& device);
// Where the descriptor statistics and energy shifts came from, when they were just frozen.
std::string statistics_frozen_line(int64_t step, const StatisticsSummary& summary);
// What the ranks' parts of the last labelled frame held: min, max and sum over the ranks of the
// centres each evaluated ([0]) and of its atoms with their ghost shell ([1]).
std::string frame_parts_line(int ranks, const long long low[2], const long long high[2],
                             const long long sum[2]);
// The calibration's factors and how well the spread ranked the errors.
std::string calibration_summary_line(const ErrorCalibration& calibration);
// One row of the learning log; `checked_value` is what the drive criterion compares (the raw
// spread without one).
LearningLogRow learning_log_row(int64_t step, const char* event, bool reference_drives,
                                const TrainingReport& report, const TrainerCounters& counters,
                                double learning_rate, double checked_value,
                                double calibration_scale);

}  // namespace otf

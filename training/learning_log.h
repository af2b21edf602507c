// Learning curves a user can watch while fix otf/train runs: one CSV row per label and per
// uncertainty check (docs/design.md §12.3), flushed as it is written. A run continued from a
// restart file keeps the rows up to its restart step and appends after them, so a crash and a
// restart leave no duplicate rows. No LibTorch or LAMMPS types.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace otf {

struct LearningLogRow {
  int64_t step = 0;
  std::string event;  // label | label_skipped | check
  bool reference_drives = false;
  int64_t reference_calls = 0;
  double loss = 0.0;
  double energy_rmse_per_atom = 0.0;
  double force_rmse = 0.0;
  double stress_rmse = 0.0;
  double max_force_uncertainty = 0.0;
  double loss_scale = 1.0;
  int64_t skipped_steps = 0;
  int64_t optimizer_steps = 0;
  int64_t buffer_frames = 0;
  int64_t skipped_labels = 0;
  double learning_rate = 0.0;
  double reference_seconds = 0.0;  // spent in the reference so far
  double training_seconds = 0.0;   // spent training, validating and measuring so far
  // drive auto accuracy (training/error_calibration.h): the calibrated errors of the checked or
  // labelled configuration (for a label: predicted before it was learned), and the committee mean's actual errors on the last label before it
  // was learned (-1: none yet). Without accuracy, the predicted force error is the raw spread.
  double predicted_force_error = 0.0;
  double predicted_energy_error = 0.0;
  double label_force_error = -1.0;
  double label_energy_error = -1.0;
  double calibration_scale = 1.0;
  // The fraction of the label's atoms above the calibrated 90% force error bound (-1: none).
  double atoms_above_bound = -1.0;
};

// The header line (column names, in LearningLogRow's order).
const char* learning_log_header();

class LearningLog {
 public:
  // continue_after_step < 0: a new log (an existing file is replaced). Otherwise the rows of
  // steps after continue_after_step are dropped (replaced atomically) and rows are appended.
  // Throws std::runtime_error naming the path.
  LearningLog(std::string path, int64_t continue_after_step);
  ~LearningLog();
  LearningLog(const LearningLog&) = delete;
  LearningLog& operator=(const LearningLog&) = delete;

  // Writes and flushes one row; throws std::runtime_error when it cannot.
  void append(const LearningLogRow& row);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace otf

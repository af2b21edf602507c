// The one restart format of fix otf/train: a tag and a format number, then one archive (the
// engine's encoding, src/training_checkpoint.h) with the policy's state, the trainer's counters,
// the training session's state (the weights stored once, inside it) and every rank's part of the
// replay buffer. Versions 1 and 2 (hand-written byte streams of OTF-Torch 0.1) are recognised and
// refused with a message saying what to do. No LibTorch in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "on_the_fly_policy.h"

namespace otf {

constexpr uint32_t kRestartFormat = 3;

struct TrainerCounters {
  int64_t reference_calls = 0;
  int64_t last_saved_step = -1;
  double max_uncertainty = 0.0;  // at the last measurement
  bool replicas_differ = false;
  int64_t skipped_labels = 0;    // labels given up after the reference failed (model driving)
  double reference_seconds = 0.0;  // wall time spent in the reference
  double training_seconds = 0.0;   // wall time spent training, validating, measuring
  // Accuracy mode (training/error_calibration.h): the calibrated errors at the last
  // measurement, and the committee mean's actual errors on the last label before it was learned
  // (-1: none yet).
  double predicted_force_error = 0.0;
  double predicted_energy_error = 0.0;
  double label_force_error = -1.0;
  double label_energy_error = -1.0;
  // The fraction of that label's atoms whose force error exceeded the 90% bound the calibration
  // predicted before it (-1: no calibration yet).
  double label_atoms_above_bound = -1.0;
  // The outlier guard (TrainerSettings::outlier_factor): labels learned, the largest force
  // component among them, and labels refused in a row.
  int64_t learned_labels = 0;
  double largest_learned_force = 0.0;
  int64_t refused_labels_in_row = 0;
  // The energy guard (TrainerSettings::outlier_energy): the range of the learned labels' energies
  // per atom (empty, lowest > highest, before the first).
  double lowest_learned_energy_per_atom = std::numeric_limits<double>::infinity();
  double highest_learned_energy_per_atom = -std::numeric_limits<double>::infinity();
  // The label journal's size in bytes when the restart file was written (-1: no journal, or a
  // restart file from before this field): a run resumed from it replays the journal's frames
  // after that point (training/journal_replay.h).
  int64_t journal_bytes = -1;
};

struct TrainerRestart {
  PolicyState policy;
  TrainerCounters counters;
  std::string session;                    // TrainingSession::save_state(); empty: none yet
  std::vector<std::string> rank_buffers;  // ReplayBuffer state of every rank that wrote it
  std::string calibration;                // ErrorCalibration::encode(); empty: none
  std::string calibration_labels;         // ErrorCalibration::encode_model_labels()
};

// A restart file's fix otf/train data that this build cannot use; the message says why and what
// to do.
class RestartFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The blob: the tag "OTFTRAIN", the format (uint32), the archive's length (uint64), the archive.
std::string encode_restart(const TrainerRestart& restart);
// The whole blob's size from its header (LAMMPS hands a fix its restart bytes without their
// count). Throws RestartFormatError when the data does not start with the tag.
std::size_t restart_blob_size(const char* data);
// Throws RestartFormatError for another kind of data, an old or newer format, or damaged bytes.
TrainerRestart decode_restart(const char* data, std::size_t size);

}  // namespace otf

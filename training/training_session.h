// The training state of on-the-fly training (the engine's TrainingStrategy, the replay buffer, the
// statistics phase, validation errors, the committee's force uncertainty) behind a header free of
// LibTorch, which LAMMPS styles include. Every member function throws std::exception with a
// message meant for the user; most are collective over the communicator given at construction.
#pragma once

#include "frame_part.h"
#include "grad_scaler_options.h"
#include "lr_schedule_settings.h"
#include "optimizer_kind.h"
#include "precision.h"

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace otf {

class Potential;

struct TrainingSessionSettings {
  Precision precision = Precision::Float32;
  OptimizerKind optimizer = OptimizerKind::Adam;
  double learning_rate = 1e-3;
  double energy_weight = 1.0;           // per-atom energy loss
  double force_weight = 10.0;
  double stress_weight = 0.0;           // 0: no stress labels, no stress loss
  int64_t steps_per_frame = 1;
  int64_t batch_frames = 4;
  int64_t buffer_frames = 200;          // the replay buffer's rules (src/replay_buffer.h)
  double validation_fraction = 0.1;
  uint64_t seed = 12345;
  double clip_max_norm = 0.0;           // 0: no clipping
  GradScalerOptions grad_scaler;        // float16 only; its rules: src/grad_scaler_options.h
  int64_t stats_frames = 4;             // frames that descriptor statistics and shifts come from
  // Learning-rate schedule (src/lr_schedule_settings.h) with its numbers.
  LRScheduleKind lr_schedule = LRScheduleKind::None;
  LRScheduleSettings lr_schedule_settings;
  int64_t accumulate = 1;               // batches per optimizer step (gradient accumulation)
  double ema_decay = 0.0;               // 0: no EMA; else saved model files hold the EMA weights
};

// The rules of the settings, each stated once by its owner: the session's own (steps, batch,
// learning rate, loss weights, seed, clipping, statistics frames, accumulation) here, the others
// by the replay buffer, the GradScaler, the EMA hook and the learning-rate schedules. Throws
// std::invalid_argument naming the setting by its fix otf/train keyword.
void check_session_settings(const TrainingSessionSettings &settings);

// What the fix reports (its global vector).
struct TrainingReport {
  double last_loss = 0.0;
  double energy_rmse_per_atom = 0.0;
  double force_rmse = 0.0;
  double stress_rmse = 0.0;
  double loss_scale = 1.0;
  int64_t skipped_steps = 0;             // steps skipped for inf/NaN loss or gradients
  int64_t consecutive_skipped_steps = 0; // of the last train() calls' steps, in a row
  int64_t optimizer_steps = 0;
  int64_t buffer_frames = 0;
  bool validated = false;
  // This rank's part of the last stored frame: the centres it evaluates (its owned atoms) and
  // its atoms (the centres and the ghosts they use).
  int64_t frame_centres = 0;
  int64_t frame_atoms = 0;
};

struct StatisticsSummary {
  int64_t frames = 0;
  int64_t frames_asked = 0;
  double last_spread_ratio = 0.0;
  double last_limit = 0.0;    // what that was compared with
};

// The committee's spread on one frame, summed over the ranks.
struct CommitteeSpread {
  double max_force_spread = 0.0;          // largest per-atom force deviation
  double mean_square_force_spread = 0.0;  // mean over the frame's atoms of the squared deviation
  double mean_energy = 0.0;               // committee mean of the frame energy
  // A model fitted in closed form: the residual standard deviation of its fit per force component
  // and per atom's energy, which no more labels remove (0 otherwise). The spreads above include
  // it (per atom: sqrt(deviation^2 + 3 force_noise^2)).
  double force_noise = 0.0;
  double energy_noise = 0.0;
  double energy_spread_per_atom = 0.0;    // members' standard deviation of it, per atom
};

class TrainingSession {
 public:
  // Collective over `world`. Throws for settings the engine rejects (precision, optimizer...).
  TrainingSession(std::shared_ptr<Potential> potential, const TrainingSessionSettings &settings,
                  MPI_Comm world);
  ~TrainingSession();
  TrainingSession(const TrainingSession &) = delete;
  TrainingSession &operator=(const TrainingSession &) = delete;

  // Collective: stores the frame (and, during the first stats_frames frames, adds its
  // descriptor moments and energy to the statistics, frozen after the last of them).
  void add_frame(const FramePart &frame);
  // Collective: steps_per_frame optimizer steps on batches drawn from the buffer (none while the
  // statistics are still being gathered or the buffer holds no training frame). A model fitted in
  // closed form (architecture bayesian-linear) is instead fitted to every frame of the buffer,
  // once: the report's optimizer_steps then counts its fits.
  void train();
  // Whether train() fits the model in closed form (potentials/bayesian_linear_potential.h): one
  // train() per label learns it completely.
  bool fits_in_closed_form() const;
  // Collective: errors of the committee mean on the buffer's validation frames (float32, no
  // autocast): the report's RMSEs, which the on-the-fly policy compares with its thresholds. A
  // metric-driven (plateau) schedule steps on the engine's validation loss (TrainingStrategy::
  // validate) over the same frames.
  void validate();
  // Collective: the committee's force uncertainty on the frame's owned atoms
  // (otf::committee_vector_deviation of the members' forces), written to
  // per_owned_atom[system.num_local] (0 for atoms of no element). Returns the maximum over all
  // ranks. Labels in the frame are not used.
  double force_uncertainty(const FramePart &frame, double *per_owned_atom);
  // Collective: the committee on the frame, for calibrated errors (training/error_calibration.h):
  // force_uncertainty's per-atom spread, and with mean_forces (not null) the committee mean's
  // forces on the owned atoms ([system.num_local][3]). The whole-frame summaries are the same on
  // every rank.
  CommitteeSpread committee_spread(const FramePart &frame, double *per_owned_atom,
                                   double *mean_forces);

  // Collective: how much wider the frame's descriptors spread than those of the statistics (the
  // labelled frames' for a model fitted in closed form), reduced over ranks: about 1 for a
  // configuration like those learned, above for one the model extrapolates to
  // (Potential::descriptor_spread_ratio); and the limit a frame of its atoms may reach by
  // sampling noise (StatisticsPhase::representative_limit).
  struct DescriptorSpread {
    double ratio = 0.0;
    double limit = 0.0;
  };
  DescriptorSpread descriptor_spread(const FramePart &frame);

  const TrainingReport &report() const { return report_; }
  // The model being trained (the pair style's, shared).
  const std::shared_ptr<Potential> &potential() const;
  bool statistics_ready() const;
  // Frames the descriptor statistics came from, the frames asked for (stats_frames), and how
  // much wider than those before it the last one spread (StatisticsPhase).
  StatisticsSummary statistics_summary() const;
  // Rank-local FNV-1a hash of every parameter and buffer of the model (replica check).
  uint64_t weights_hash() const;
  // Rank-local: writes the model atomically (call on one rank): the EMA weights when EMA is on
  // and has averaged at least once, the live weights otherwise.
  void save(const std::string &path) const;
  double learning_rate() const;
  // The training device, e.g. "cpu" or "cuda:0".
  std::string device_name() const;

  // Restart (training/restart_archive.h). Rank-local. save_state: one archive holding the
  // strategy's whole training state (src/training_checkpoint.h: the model's parameters and
  // buffers, descriptor statistics and energy shifts included, optimizer moments, GradScaler,
  // counters, RNG, hooks), the statistics phase, the report and the model's training metadata.
  // The replay buffer is separate because each rank's part differs. load_state loads into the
  // existing model object (the pair style keeps evaluating it); it throws std::exception naming
  // what does not match.
  // with_snapshot: also the weights of the last snapshot_weights() (those the MD forces of the
  // current step came from, when the step was labelled and trained after the force evaluation).
  std::string save_state(bool with_snapshot) const;
  void load_state(const std::string &bytes);
  // Rank-local: keeps a copy of every parameter and buffer of the model.
  void snapshot_weights();
  // Rank-local: exchanges the model's weights with the snapshot's (false, doing nothing, when
  // there is none); clear_snapshot() drops it.
  bool swap_snapshot_weights();
  void clear_snapshot();
  std::string save_buffer_state() const;
  void load_buffer_state(const std::string &bytes);

 private:
  void fit_in_closed_form();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  TrainingReport report_;
};

}    // namespace otf

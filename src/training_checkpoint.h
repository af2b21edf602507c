// The whole training state of a TrainingStrategy in one archive, so that a resumed run continues
// bitwise like an uninterrupted one: model parameters and buffers, optimizer state, schedules,
// counters, LibTorch's CPU random generator, and every Checkpointable hook (the mixed-precision
// hook's GradScaler scale and growth tracker, EMA weights, accumulation counters). The reference
// toolkit drops the GradScaler on resume; OTF-Torch does not.
#pragma once

#include <string>

#include "hook.h"

namespace otf {

class TrainingStrategy;

// Bumped when the layout changes; a newer file is refused with a message saying so.
constexpr int kTrainingCheckpointFormat = 1;

// In memory (LAMMPS restart files embed it). load builds the strategy's optimizers first (unless
// the state was saved before any were built and this strategy has built none either: then both
// build them at their first batch), so the strategy must be configured as the saved one was (same
// models, optimizers, schedules and hooks, in the same order); a mismatch is an exception naming
// what differs. The gradients held between batches are saved too (an accumulation group part-way).
std::string save_training_state(const TrainingStrategy& strategy);
void load_training_state(TrainingStrategy& strategy, const std::string& bytes);

// On disk, written atomically (a temporary file in the same folder, then rename), so a crash
// never leaves a half-written checkpoint under the final name. Errors name the file.
void save_training_checkpoint(const TrainingStrategy& strategy, const std::string& path);
void load_training_checkpoint(TrainingStrategy& strategy, const std::string& path);

// Writes a checkpoint every `step_interval` executed optimizer steps, at AFTER_BATCH, to
// `directory`/checkpoint-<step>.pt (and a copy named latest.pt), on rank 0 only by default.
// Unlike the reference's hook, it saves only after a batch whose step ran, so accumulation
// micro-batches parked on the same step_count do not write the same checkpoint again.
class CheckpointHook final : public Hook {
 public:
  CheckpointHook(std::string directory, int64_t step_interval, bool rank_zero_only = true);
  void operator()(TrainContext& ctx, TrainingStage stage) override;

  const std::string& last_checkpoint_path() const { return last_checkpoint_path_; }

 private:
  std::string directory_;
  int64_t step_interval_;
  bool rank_zero_only_;
  int64_t last_saved_step_ = 0;
  std::string last_checkpoint_path_;
};

}  // namespace otf

// The eighteen points of a training run at which hooks fire (TrainingStage), in the order the
// reference toolkit declares them (nvalchemi.training._stages; docs/design.md §3.1), with
// their canonical names for messages and logs.
#pragma once

#include <array>
#include <iosfwd>
#include <string>
#include <string_view>

namespace otf {

// Values run 1..18 in declaration order, as Python's auto() gives them; tests snapshot both.
// Every member but Setup starts with Before, After or Do; each DoX sits between BeforeX and AfterX
// (docs/design.md §3.1 lists when each fires).
enum class TrainingStage : int {
  Setup = 1,       // every run() and every train_batch(), before optimizers are built
  BeforeTraining,  // first batch a run() processes
  BeforeEpoch,     // before a batch whenever epoch_step_count == 0
  BeforeBatch,     // first per-batch stage; gradients are zeroed right after it
  BeforeForward,   // also around validation forwards
  AfterForward,    // also around validation forwards
  BeforeLoss,
  AfterLoss,       // ctx.loss and ctx.losses live (attached to the graph)
  BeforeBackward,  // the loss is still live
  DoBackward,      // replacement slot: at most one claimant
  AfterBackward,   // ctx.loss and ctx.losses detached, the loss the unscaled total
  BeforeOptimizerStep,
  DoOptimizerStep,     // replacement slot: at most one claimant
  AfterOptimizerStep,  // always fires, skipped step or not; counters pre-increment
  AfterBatch,          // counters incremented
  AfterEpoch,          // after an exhausted epoch, epoch incremented
  AfterTraining,       // once per run(), if any batch was seen
  AfterValidation,     // inside validate(), before metric-driven schedulers step
};

inline constexpr int kTrainingStageCount = 18;

// Every stage in declaration order.
const std::array<TrainingStage, kTrainingStageCount>& all_training_stages();

// The reference's member names: "SETUP", "BEFORE_TRAINING", ..., "AFTER_VALIDATION".
std::string to_string(TrainingStage stage);
std::ostream& operator<<(std::ostream& out, TrainingStage stage);

// The inverse of to_string (exact, upper case); throws std::invalid_argument naming the bad value
// and listing the stages.
TrainingStage parse_training_stage(std::string_view name);

}  // namespace otf

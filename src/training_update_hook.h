// Update hooks: the hooks that shape one optimizer update (gradient accumulation, mixed
// precision, clipping, spike skipping, EMA). They never register on their own; the strategy folds
// them into one TrainingUpdateOrchestrator, which runs them by priority, composes their vetoes and
// threads the loss through them (docs/design.md §4.3 and §5).
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "train_context.h"
#include "training_stage.h"

namespace otf {

// What an update hook returns at each update stage (the reference's (proceed, loss) tuple).
struct UpdateResult {
  // Read at BEFORE_BATCH (false vetoes zero_grad, so gradients accumulate) and DO_OPTIMIZER_STEP
  // (false vetoes the optimizer, scheduler and GradScaler step); ignored elsewhere.
  bool proceed = true;
  // Read at DO_BACKWARD only, where it must be defined: it becomes ctx.loss for the next hook and,
  // from the last hook, the loss backward() runs on. Return ctx.loss to leave it unchanged.
  torch::Tensor loss;
};

class TrainingUpdateHook {
 public:
  // Lower runs first. The reference's canonical buckets: 10 gradient accumulation, 20 mixed
  // precision, 30 gradient clipping, 40 spike skipping; EMA and the default are 50.
  static constexpr int kDefaultPriority = 50;

  // exclusive_key: at most one hook with this key per orchestrator (e.g. "MixedPrecisionHook").
  explicit TrainingUpdateHook(int priority = kDefaultPriority,
                              std::optional<std::string> exclusive_key = std::nullopt);
  virtual ~TrainingUpdateHook() = default;

  // An identity, as plain hooks are: no copies.
  TrainingUpdateHook(const TrainingUpdateHook&) = delete;
  TrainingUpdateHook& operator=(const TrainingUpdateHook&) = delete;

  int priority() const { return priority_; }
  const std::optional<std::string>& exclusive_key() const { return exclusive_key_; }

  // BEFORE_BATCH, DO_BACKWARD, DO_OPTIMIZER_STEP, AFTER_OPTIMIZER_STEP. The orchestrator calls
  // every child at each of these (and at SETUP) without asking: call() dispatches on the stage.
  static bool runs_on_stage(TrainingStage stage);

  // will_skip: at BEFORE_BATCH and DO_OPTIMIZER_STEP, whether a hook before this one vetoed (the
  // hook is still called: no short-circuit); at AFTER_OPTIMIZER_STEP, whether the step was skipped
  // (vetoed or by the GradScaler); false elsewhere. The default changes nothing:
  // {true, ctx.loss}.
  virtual UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip);

  // Forwarded by the orchestrator from the strategy's lifecycle: enter() in priority order,
  // exit() in reverse.
  virtual void enter() {}
  virtual void exit() {}

  // For messages: the class name without the otf:: prefix.
  virtual std::string name() const;

 private:
  int priority_;
  std::optional<std::string> exclusive_key_;
};

}  // namespace otf

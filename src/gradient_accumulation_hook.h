// Gradient accumulation as an update hook: N micro-batches add their gradients into one effective
// batch and the optimizer steps once per group, on the mean gradient (the priority-10 bucket;
// docs/design.md §5.6; the reference toolkit has only test helpers).
#pragma once

#include <torch/serialize/archive.h>

#include <cstdint>

#include "hook.h"
#include "train_context.h"
#include "training_stage.h"
#include "training_update_hook.h"

namespace otf {

// Per stage, for micro-batch k = 0..N-1 of a group:
//   BEFORE_BATCH          vetoes zero_grad unless k == 0, so gradients add up across the group.
//   DO_BACKWARD           returns ctx.loss / N: the accumulated gradient is the mean over the
//                         group, i.e. the gradient of the concatenated batch when the micro-batches
//                         have equal sizes and the loss is a mean.
//   DO_OPTIMIZER_STEP     vetoes the step unless k == N-1. MixedPrecisionHook (20) then sees
//                         will_skip and does not unscale, so accumulated gradients stay scaled
//                         until the effective batch steps (docs/design.md §7.5); clipping
//                         (30) is skipped too.
//   AFTER_OPTIMIZER_STEP  advances k. A group ends here whether its step ran, was skipped by the
//                         GradScaler (inf/NaN) or was vetoed by a later hook: the next group zeroes
//                         the gradients and starts afresh.
// N == 1 changes nothing (no veto, the loss tensor itself is returned).
//
// The hook counts micro-batches itself rather than reading ctx.counters.batch_count: a group then
// starts with the first batch this hook sees (also when it joins a strategy that has already
// trained), and the position survives a restart through save()/load(), so groups stay aligned
// with the data stream as in an uninterrupted run. A batch that throws before
// AFTER_OPTIMIZER_STEP does not advance the count.
// A checkpoint taken mid-group (docs/design.md §8.3) holds the position here and the partial
// gradient sum, which lives in the parameters' .grad, in the training state
// (src/training_checkpoint.h), so the resumed group steps as the uninterrupted one does.
class GradientAccumulationHook final : public TrainingUpdateHook, public Checkpointable {
 public:
  // The canonical bucket: before mixed precision (20) scales the loss and before clipping (30).
  static constexpr int kPriority = 10;
  // Two accumulation hooks would divide the loss twice and interleave their vetoes.
  static constexpr const char* kExclusiveKey = "GradientAccumulationHook";

  // steps: micro-batches per optimizer step, >= 1; otherwise std::invalid_argument.
  explicit GradientAccumulationHook(int64_t steps);

  int64_t steps() const { return steps_; }
  // Position k of the next (or current) micro-batch in its group, 0..steps()-1.
  int64_t micro_batch_in_group() const { return micro_batch_in_group_; }
  // Whether the current micro-batch closes its group (the optimizer steps on it).
  bool completes_group() const { return micro_batch_in_group_ == steps_ - 1; }

  UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip) override;

  // Keys "steps" (checked on load) and "micro_batch_in_group". load() throws std::invalid_argument
  // ("GradientAccumulationHook checkpoint conflict: steps=4 vs constructor steps=2; ...") when the
  // checkpoint was written with another group size, leaving the hook unchanged; an archive without
  // these keys leaves it unchanged too.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  int64_t steps_;
  int64_t micro_batch_in_group_ = 0;
};

}  // namespace otf

// What a hook sees when it fires: the batch, the models, optimizers and schedulers, the loss and
// the counters (the reference toolkit's TrainContext; docs/design.md §2). The strategy
// builds one per batch and shares it across that batch's stages, so what a hook writes (e.g.
// grad_scaler) is visible to the later stages of the same batch.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "training_batch.h"

namespace otf {

class GradScaler;
class LRScheduler;
class TrainingStrategy;

// Models by name ("main" for a single model). Shared: hooks may hold on to them (EMA), and a setup
// hook may replace one (a wrapper) before optimizers are built.
using NamedModels = std::map<std::string, std::shared_ptr<torch::nn::Module>>;

// A validation pass reduced to numbers: "total_loss", "num_batches", and one
// "per_component_unweighted/<name>" per loss component.
using ValidationSummary = std::map<std::string, double>;

struct TrainingCounters {
  // Optimizer steps executed on this process (a vetoed or scaler-skipped step does not count).
  int64_t step_count = 0;
  // Executed steps summed over data-parallel ranks: advances by the world size per step.
  int64_t global_step_count = 0;
  // Completed batches, skipped steps included.
  int64_t batch_count = 0;
  // Batches consumed in the current epoch.
  int64_t epoch_step_count = 0;
  // Completed epochs (the reference's epoch_count, alias epoch).
  int64_t epoch = 0;

  bool operator==(const TrainingCounters& other) const;
  bool operator!=(const TrainingCounters& other) const { return !(*this == other); }
};

struct TrainContext {
  // The current batch, already on devices()[0]; nullptr at SETUP. At AFTER_EPOCH, AFTER_TRAINING
  // and AFTER_VALIDATION it is the last training batch.
  const TrainingBatch* batch = nullptr;
  // The strategy running the hooks; nullptr only when a test drives a hook directly.
  TrainingStrategy* workflow = nullptr;
  // The strategy's models (borrowed, mutable so that SETUP hooks may wrap them).
  NamedModels* models = nullptr;
  // Flat and positionally aligned; empty at the SETUP of a first run (not built yet). A null
  // scheduler means that optimizer has none.
  std::vector<torch::optim::Optimizer*> optimizers;
  std::vector<LRScheduler*> lr_schedulers;
  // Set by MixedPrecisionHook (float16 only) at BEFORE_BATCH, DO_BACKWARD and DO_OPTIMIZER_STEP;
  // the update orchestrator steps through it when set.
  GradScaler* grad_scaler = nullptr;
  // Undefined before the loss exists. The live total from AFTER_LOSS through BEFORE_BACKWARD
  // (inside DO_BACKWARD each update hook's returned loss, e.g. the scaled one); from AFTER_BACKWARD
  // on the detached, unscaled total. Undefined again at AFTER_TRAINING.
  torch::Tensor loss;
  // The loss function's full output, on the same timeline as `loss`.
  std::optional<LossOutput> losses;
  // Pre-increment during a batch's stages; refreshed before AFTER_BATCH and AFTER_EPOCH.
  TrainingCounters counters;
  int global_rank = 0;
  // The latest validation summary (the strategy's last_validation()).
  std::optional<ValidationSummary> validation;
  // Set by the update orchestrator at DO_OPTIMIZER_STEP: an update hook vetoed the step (as
  // opposed to the GradScaler skipping it for inf/NaN gradients). Lets the hook that unscaled
  // gradients put them back (docs/design.md §7.6).
  bool optimizer_step_vetoed = false;

  // workflow->devices(), or {CPU} without a workflow; devices()[0] is the primary device, where
  // batches live and autocast runs.
  std::vector<c10::Device> devices() const;
};

}  // namespace otf

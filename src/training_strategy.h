// The training loop: models, training and loss functions, optimizers and schedulers, and an
// ordered list of hooks fired at the eighteen TrainingStages. run() trains over a list of batches
// for a number of steps or epochs; train_batch() is the online entry point the LAMMPS fix calls
// once per labelled configuration batch (docs/design.md §3, §4 and §6).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hook.h"
#include "lr_scheduler.h"
#include "train_context.h"
#include "training_batch.h"
#include "training_stage.h"
#include "training_update_hook.h"

namespace otf {

class Communicator;
class GradScaler;
class MixedPrecisionHook;
class TrainingUpdateOrchestrator;

// The model forward: predictions for a batch, e.g. {"energy", "forces"}. It receives every model
// by name (the reference passes the bare model when there is only "main"; one signature here).
using TrainingFunction =
    std::function<Predictions(const NamedModels& models, const TrainingBatch& batch)>;
// The loss of predictions against the batch's labels. step and epoch are the strategy's
// step_count and epoch, for loss-weight schedules.
using LossFunction = std::function<LossOutput(
    const Predictions& predictions, const TrainingBatch& batch, int64_t step, int64_t epoch)>;

// One optimizer over one model's trainable parameters (requires_grad), with an optional schedule.
struct OptimizerConfig {
  std::string model_key = "main";
  std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor> parameters)>
      make_optimizer;
  // Optional.
  std::function<std::unique_ptr<LRScheduler>(torch::optim::Optimizer& optimizer)> make_scheduler;
  // The validation-summary entry a metric-driven schedule steps on.
  std::string scheduler_metric_key = "total_loss";
};

// A hook as the strategy accepts it: plain (an orchestrator counts as plain) or update. Update
// hooks are folded into one TrainingUpdateOrchestrator.
using HookEntry = std::variant<std::shared_ptr<Hook>, std::shared_ptr<TrainingUpdateHook>>;

struct TrainingStrategyOptions {
  NamedModels models;
  TrainingFunction training_fn;
  LossFunction loss_fn;
  // Flattened in this order into the aligned optimizers() and lr_schedulers().
  std::vector<OptimizerConfig> optimizer_configs;
  // run() needs exactly one of these (each >= 1); train_batch() ignores both.
  std::optional<int64_t> num_steps;
  std::optional<int64_t> num_epochs;
  // With num_epochs: the step target is ceil(num_epochs * batches per epoch * modifier); e.g. 0.5
  // for two batches per step under gradient accumulation. Must be > 0.
  double epoch_step_modifier = 1.0;
  // devices[0] is primary: batches and autocast live there. One device, or one per model.
  std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
  std::vector<HookEntry> hooks;
};

class TrainingStrategy {
 public:
  // Throws std::invalid_argument for an invalid configuration or hook list (the rules are those of
  // register_hook, docs/design.md §4.4).
  explicit TrainingStrategy(TrainingStrategyOptions options);
  ~TrainingStrategy();

  TrainingStrategy(const TrainingStrategy&) = delete;
  TrainingStrategy& operator=(const TrainingStrategy&) = delete;

  // ---- Hooks -------------------------------------------------------------------------------
  // Appends a plain hook, or folds an update hook into the orchestrator (created at the position
  // of the first update hook). `stage` assigns a plain hook's stage; it is rejected for update
  // hooks and orchestrators, which run on the orchestrator's stages. Rejected, leaving the list
  // and the hook as they were (std::invalid_argument): a null hook, a frequency <= 0, a hook
  // running on no stage, the same instance twice, two orchestrators, two claimants of DO_BACKWARD
  // or DO_OPTIMIZER_STEP, two update hooks with one exclusive key.
  void register_hook(HookEntry hook, std::optional<TrainingStage> stage = std::nullopt);
  // Top-level hooks in firing order, the orchestrator in place of the update hooks.
  const std::vector<std::shared_ptr<Hook>>& hooks() const { return hooks_; }
  // nullptr without update hooks.
  TrainingUpdateOrchestrator* update_orchestrator() const { return orchestrator_; }
  // The registered MixedPrecisionHook, or nullptr.
  MixedPrecisionHook* mixed_precision_hook() const;
  // Every hook (top level and orchestrator children) that has checkpoint state.
  std::vector<Checkpointable*> checkpointable_hooks() const;

  // ---- Lifecycle (docs/design.md §4.5) -------------------------------------------------------
  // Depth-counted: the first enter() enters every top-level hook in list order (the orchestrator
  // forwards to its children), the matching exit() exits them in reverse order. run(),
  // validate() and train_batch() enter and exit around themselves; hold a Scope to keep hooks
  // entered across many train_batch() calls.
  void enter();
  void exit();
  bool is_entered() const { return lifecycle_depth_ > 0; }

  class Scope {
   public:
    explicit Scope(TrainingStrategy& strategy);
    // Exits unless close() did; swallows errors, as a destructor must (an exception that is
    // unwinding is the one to report).
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    // Exits now, letting errors propagate.
    void close();

   private:
    TrainingStrategy& strategy_;
    bool closed_ = false;
  };

  // ---- Training ------------------------------------------------------------------------------
  // Trains until step_count reaches num_steps, or ceil(num_epochs * batches.size() *
  // epoch_step_modifier) executed optimizer steps, cycling through the batches epoch after epoch
  // in the stage order of docs/design.md §3.2. A run whose target is already reached fires SETUP
  // and nothing else, so a second run() with the same target is a no-op.
  void run(const std::vector<TrainingBatch>& batches);
  // One batch, online (docs/design.md §3.3 for the batch): SETUP on every call, optimizers built on
  // the first call and reused, no BEFORE_TRAINING, epoch or validation stages, num_steps/num_epochs
  // ignored. Returns whether the optimizer step ran (false when vetoed or skipped by the
  // GradScaler).
  bool train_batch(const TrainingBatch& batch);
  // Forward and loss over `batches` with every model in eval mode, inside the mixed-precision
  // hook's inference region; fires BEFORE_FORWARD/AFTER_FORWARD per batch and, once a training
  // batch has been seen, AFTER_VALIDATION; then steps metric-driven schedulers with their
  // configured summary entry. Sums are reduced over the communicator's ranks. Gradient mode stays
  // on (forces are gradients of the energy) but parameter gradients are left as they were.
  ValidationSummary validate(const std::vector<TrainingBatch>& batches);

  // ---- State ---------------------------------------------------------------------------------
  const std::vector<c10::Device>& devices() const { return devices_; }
  // For a hook's prepare() (a data-parallel hook moving each rank to its device).
  void set_devices(std::vector<c10::Device> devices);
  NamedModels& models() { return options_.models; }
  const NamedModels& models() const { return options_.models; }

  // Builds the optimizers and schedulers unless built (run() and train_batch() call it; a
  // checkpoint loader calls it before loading their state). Throws std::invalid_argument for a
  // model without trainable parameters.
  void build_optimizers();
  bool optimizers_built() const { return !runtime_optimizers_.empty(); }
  std::vector<torch::optim::Optimizer*> optimizers() const;
  // Aligned with optimizers(); nullptr where an optimizer has no schedule.
  std::vector<LRScheduler*> lr_schedulers() const;
  // The mixed-precision hook's GradScaler (nullptr without float16 or before the first batch).
  GradScaler* grad_scaler() const;

  const TrainingCounters& counters() const { return counters_; }
  // For resuming from a checkpoint. Throws std::invalid_argument for negative counters.
  void set_counters(const TrainingCounters& counters);

  const std::optional<ValidationSummary>& last_validation() const { return last_validation_; }

  // Data parallelism: gradients are summed over the communicator's ranks after each backward,
  // the GradScaler agrees on skips across ranks, global_step_count advances by size() and
  // ctx.global_rank is rank(). Default: a single process. Parameters are not broadcast here:
  // start every rank from the same weights (otf::broadcast_parameters).
  void set_communicator(std::shared_ptr<Communicator> communicator);
  const std::shared_ptr<Communicator>& communicator() const { return communicator_; }

 private:
  struct RuntimeOptimizer {
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    std::unique_ptr<LRScheduler> scheduler;
    std::string scheduler_metric_key;
  };

  void set_hooks(std::vector<std::shared_ptr<Hook>> hooks);
  TrainContext make_context(const TrainingBatch* batch);
  void dispatch(TrainingStage stage, TrainContext& ctx);
  // A fresh context for a stage outside a batch (docs/design.md §2.1).
  void dispatch_outside_batch(TrainingStage stage, const TrainingBatch* batch);
  bool has_claimant(TrainingStage stage) const;
  void prepare_and_move_models();
  void run_setup_hooks();
  bool train_one_batch(const TrainingBatch& batch);
  // The per-batch sequence of docs/design.md §3.3; train_one_batch adds the cleanup on errors.
  bool run_batch_stages(const TrainingBatch& batch);
  void step_metric_driven_schedulers(const ValidationSummary& summary);

  // hooks is emptied at construction: hooks_ holds them, folded.
  TrainingStrategyOptions options_;
  std::vector<c10::Device> devices_;
  std::vector<std::shared_ptr<Hook>> hooks_;
  TrainingUpdateOrchestrator* orchestrator_ = nullptr;
  std::vector<RuntimeOptimizer> runtime_optimizers_;
  TrainingCounters counters_;
  std::optional<TrainingBatch> last_batch_;
  std::optional<ValidationSummary> last_validation_;
  std::shared_ptr<Communicator> communicator_;
  int lifecycle_depth_ = 0;
};

// Folds the update hooks of `entries` into one orchestrator at the position of the first update
// item ([A, U1, B, U2] -> [A, Orchestrator(U1, U2), B]); a lone orchestrator is kept as is.
// Throws std::invalid_argument for a null entry or more than one orchestrator (docs/design.md
// §4.4).
std::vector<std::shared_ptr<Hook>> fold_training_update_hooks(
    const std::vector<HookEntry>& entries);

}  // namespace otf

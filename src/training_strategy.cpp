#include "training_strategy.h"

#include <torch/autograd.h>

#include <cmath>
#include <exception>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

#include "communicator.h"
#include "mixed_precision_hook.h"
#include "training_update_orchestrator.h"

namespace otf {
namespace {

std::string join_names(const std::vector<std::shared_ptr<Hook>>& hooks) {
  std::string names;
  for (const auto& hook : hooks) names += (names.empty() ? "" : ", ") + hook->name();
  return names;
}

bool is_orchestrator(const Hook& hook) {
  return dynamic_cast<const TrainingUpdateOrchestrator*>(&hook) != nullptr;
}

// The registry's checks on a complete top-level list (docs/design.md §4.2, §4.4).
void validate_hook_list(const std::vector<std::shared_ptr<Hook>>& hooks) {
  std::unordered_set<const Hook*> seen;
  int orchestrators = 0;
  for (const auto& hook : hooks) {
    if (!hook) throw std::invalid_argument("TrainingStrategy: a hook is null");
    if (!seen.insert(hook.get()).second) {
      throw std::invalid_argument("hooks must not contain duplicate hook instances; " +
                                  hook->name() + " is registered twice");
    }
    if (hook->frequency() <= 0) {
      throw std::invalid_argument("Hook frequency must be a positive integer, got " +
                                  std::to_string(hook->frequency()) + " for " + hook->name());
    }
    bool runs_somewhere = false;
    for (const TrainingStage stage : all_training_stages()) {
      runs_somewhere = runs_somewhere || hook->runs_on_stage(stage);
    }
    if (!runs_somewhere) {
      throw std::invalid_argument(hook->name() +
                                  " has no stage assigned: pass one to its constructor or to "
                                  "register_hook(hook, stage), or override runs_on_stage");
    }
    if (is_orchestrator(*hook)) ++orchestrators;
  }
  if (orchestrators > 1) {
    throw std::invalid_argument(
        "Only one TrainingUpdateOrchestrator is allowed; compose update hooks with `+` before "
        "registration.");
  }
  // A claimant replaces the strategy's own backward or optimizer step, so two would both run it.
  for (const TrainingStage stage : {TrainingStage::DoBackward, TrainingStage::DoOptimizerStep}) {
    std::vector<std::shared_ptr<Hook>> claimants;
    bool orchestrator_involved = false;
    for (const auto& hook : hooks) {
      if (!hook->runs_on_stage(stage)) continue;
      claimants.push_back(hook);
      orchestrator_involved = orchestrator_involved || is_orchestrator(*hook);
    }
    if (claimants.size() <= 1) continue;
    std::string message = "At most one hook may claim " + to_string(stage) + "; got " +
                          std::to_string(claimants.size()) + ": " + join_names(claimants) + ".";
    message += orchestrator_involved
                   ? " The TrainingUpdateOrchestrator (which every update hook, MixedPrecisionHook "
                     "included, is folded into) owns DO_BACKWARD and DO_OPTIMIZER_STEP: make the "
                     "other claimant a TrainingUpdateHook that returns a transformed loss or "
                     "vetoes the step."
                   : " Merge them into one hook, or make them TrainingUpdateHooks.";
    throw std::invalid_argument(message);
  }
}

// Puts models into the modes a pass needs and restores every module's mode (and frozen
// parameters' requires_grad) when it goes out of scope.
class ModelModeGuard {
 public:
  // training: models with an optimizer train, the others are put in eval mode and frozen
  // (the reference's freeze_unconfigured_models; docs/design.md §3.2). !training: all eval.
  ModelModeGuard(const NamedModels& models, const std::set<std::string>& configured,
                 bool training) {
    for (const auto& [key, model] : models) {
      for (const auto& module : model->modules(/*include_self=*/true)) {
        saved_modes_.emplace_back(module, module->is_training());
      }
      const bool trains = training && configured.count(key) > 0;
      if (training && !trains) {
        for (auto& parameter : model->parameters()) {
          saved_requires_grad_.emplace_back(parameter, parameter.requires_grad());
          parameter.requires_grad_(false);
        }
      }
      model->train(trains);
    }
  }
  ~ModelModeGuard() {
    // modules() is pre-order and train() recurses, so restoring in order leaves each module with
    // its own saved mode.
    for (auto& [module, was_training] : saved_modes_) module->train(was_training);
    for (auto& [parameter, required] : saved_requires_grad_) parameter.requires_grad_(required);
  }
  ModelModeGuard(const ModelModeGuard&) = delete;
  ModelModeGuard& operator=(const ModelModeGuard&) = delete;

 private:
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, bool>> saved_modes_;
  std::vector<std::pair<torch::Tensor, bool>> saved_requires_grad_;
};

std::set<std::string> configured_models(const std::vector<OptimizerConfig>& configs) {
  std::set<std::string> keys;
  for (const auto& config : configs) keys.insert(config.model_key);
  return keys;
}

std::string unknown_model_message(std::size_t config_index, const std::string& model_key,
                                  const NamedModels& models) {
  std::string keys;
  for (const auto& entry : models) keys += (keys.empty() ? "" : ", ") + entry.first;
  return "TrainingStrategy: optimizer config " + std::to_string(config_index) + " names model '" +
         model_key + "', which is not among the models (" + keys + ")";
}

void validate_options(const TrainingStrategyOptions& options) {
  if (options.models.empty()) {
    throw std::invalid_argument("TrainingStrategy: models must not be empty");
  }
  for (const auto& [key, model] : options.models) {
    if (!model) throw std::invalid_argument("TrainingStrategy: model '" + key + "' is null");
  }
  if (!options.training_fn) {
    throw std::invalid_argument("TrainingStrategy: training_fn is required");
  }
  if (!options.loss_fn) throw std::invalid_argument("TrainingStrategy: loss_fn is required");
  if (options.optimizer_configs.empty()) {
    throw std::invalid_argument("TrainingStrategy: optimizer_configs must not be empty");
  }
  for (std::size_t i = 0; i < options.optimizer_configs.size(); ++i) {
    const OptimizerConfig& config = options.optimizer_configs[i];
    if (options.models.count(config.model_key) == 0) {
      throw std::invalid_argument(unknown_model_message(i, config.model_key, options.models));
    }
    if (!config.make_optimizer) {
      throw std::invalid_argument("TrainingStrategy: optimizer config " + std::to_string(i) +
                                  " has no make_optimizer");
    }
  }
  if (options.num_steps && options.num_epochs) {
    throw std::invalid_argument("TrainingStrategy: set num_steps or num_epochs, not both");
  }
  if (options.num_steps && *options.num_steps < 1) {
    throw std::invalid_argument("TrainingStrategy: num_steps must be >= 1, got " +
                                std::to_string(*options.num_steps));
  }
  if (options.num_epochs && *options.num_epochs < 1) {
    throw std::invalid_argument("TrainingStrategy: num_epochs must be >= 1, got " +
                                std::to_string(*options.num_epochs));
  }
  if (!(options.epoch_step_modifier > 0.0) || !std::isfinite(options.epoch_step_modifier)) {
    throw std::invalid_argument(
        "TrainingStrategy: epoch_step_modifier must be a finite number > "
        "0, got " +
        std::to_string(options.epoch_step_modifier));
  }
}

void validate_devices(const std::vector<c10::Device>& devices, std::size_t model_count) {
  if (devices.empty()) throw std::invalid_argument("TrainingStrategy: devices must not be empty");
  if (devices.size() != 1 && devices.size() != model_count) {
    throw std::invalid_argument(
        "TrainingStrategy: devices must hold one device or one per model; "
        "got " +
        std::to_string(devices.size()) + " devices for " + std::to_string(model_count) + " models");
  }
}

}  // namespace

std::vector<std::shared_ptr<Hook>> fold_training_update_hooks(
    const std::vector<HookEntry>& entries) {
  std::vector<std::shared_ptr<Hook>> others;
  std::vector<UpdateHookItem> updates;
  std::optional<std::size_t> insert_at;
  std::shared_ptr<TrainingUpdateOrchestrator> explicit_orchestrator;
  int orchestrators = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (const auto* update = std::get_if<std::shared_ptr<TrainingUpdateHook>>(&entries[i])) {
      if (!*update) {
        throw std::invalid_argument("TrainingStrategy: hook " + std::to_string(i) + " is null");
      }
      if (!insert_at) insert_at = others.size();
      updates.emplace_back(*update);
      continue;
    }
    const auto& hook = std::get<std::shared_ptr<Hook>>(entries[i]);
    if (!hook) {
      throw std::invalid_argument("TrainingStrategy: hook " + std::to_string(i) + " is null");
    }
    if (auto orchestrator = std::dynamic_pointer_cast<TrainingUpdateOrchestrator>(hook)) {
      if (!insert_at) insert_at = others.size();
      updates.emplace_back(orchestrator);
      explicit_orchestrator = std::move(orchestrator);
      ++orchestrators;
      continue;
    }
    others.push_back(hook);
  }
  if (updates.empty()) return others;
  if (orchestrators > 1) {
    throw std::invalid_argument(
        "Only one TrainingUpdateOrchestrator is allowed; compose update hooks with `+` before "
        "registration.");
  }
  // A lone explicit orchestrator keeps its identity.
  std::shared_ptr<Hook> orchestrator =
      updates.size() == 1 && explicit_orchestrator
          ? std::static_pointer_cast<Hook>(explicit_orchestrator)
          : std::static_pointer_cast<Hook>(compose_update_hooks(updates));
  others.insert(others.begin() + static_cast<std::ptrdiff_t>(*insert_at), std::move(orchestrator));
  return others;
}

// ---- Construction and hooks --------------------------------------------------------------------

TrainingStrategy::TrainingStrategy(TrainingStrategyOptions options)
    : options_(std::move(options)), communicator_(std::make_shared<SingleProcessCommunicator>()) {
  validate_options(options_);
  validate_devices(options_.devices, options_.models.size());
  devices_ = options_.devices;
  std::vector<std::shared_ptr<Hook>> hooks = fold_training_update_hooks(options_.hooks);
  options_.hooks.clear();
  validate_hook_list(hooks);
  set_hooks(std::move(hooks));
}

TrainingStrategy::~TrainingStrategy() = default;

void TrainingStrategy::set_hooks(std::vector<std::shared_ptr<Hook>> hooks) {
  hooks_ = std::move(hooks);
  orchestrator_ = nullptr;
  for (const auto& hook : hooks_) {
    if (auto* orchestrator = dynamic_cast<TrainingUpdateOrchestrator*>(hook.get())) {
      orchestrator_ = orchestrator;
      break;
    }
  }
}

void TrainingStrategy::register_hook(HookEntry entry, std::optional<TrainingStage> stage) {
  const auto* plain = std::get_if<std::shared_ptr<Hook>>(&entry);
  const auto* update = std::get_if<std::shared_ptr<TrainingUpdateHook>>(&entry);
  const bool is_update = update != nullptr || (*plain && is_orchestrator(**plain));
  if (is_update) {
    if (stage) {
      const std::string name = update == nullptr ? (*plain)->name()
                               : *update         ? (*update)->name()
                                                 : std::string("(null)");
      throw std::invalid_argument(
          "stage= is not supported for TrainingUpdateHook " + name +
          ": update hooks run on BEFORE_BATCH, DO_BACKWARD, DO_OPTIMIZER_STEP and "
          "AFTER_OPTIMIZER_STEP through the TrainingUpdateOrchestrator");
    }
    // Refold the whole list: the new hook joins the orchestrator (a new one, at its position).
    std::vector<HookEntry> entries(hooks_.begin(), hooks_.end());
    entries.push_back(std::move(entry));
    std::vector<std::shared_ptr<Hook>> candidate = fold_training_update_hooks(entries);
    validate_hook_list(candidate);
    set_hooks(std::move(candidate));
    return;
  }
  const std::shared_ptr<Hook>& hook = *plain;
  if (!hook) throw std::invalid_argument("TrainingStrategy::register_hook: the hook is null");
  // Validate the whole would-be list first; on failure the hook gets its stages back and the
  // list is untouched.
  const std::set<TrainingStage> previous_stages = hook->stages();
  if (stage) hook->set_stages({*stage});
  try {
    std::vector<std::shared_ptr<Hook>> candidate = hooks_;
    candidate.push_back(hook);
    validate_hook_list(candidate);
    set_hooks(std::move(candidate));
  } catch (...) {
    hook->set_stages(previous_stages);
    throw;
  }
}

MixedPrecisionHook* TrainingStrategy::mixed_precision_hook() const {
  if (orchestrator_ == nullptr) return nullptr;
  for (const auto& hook : orchestrator_->hooks()) {
    if (auto* mixed_precision = dynamic_cast<MixedPrecisionHook*>(hook.get())) {
      return mixed_precision;
    }
  }
  return nullptr;
}

std::vector<Checkpointable*> TrainingStrategy::checkpointable_hooks() const {
  std::vector<Checkpointable*> result;
  for (const auto& hook : hooks_) {
    if (const auto* orchestrator = dynamic_cast<const TrainingUpdateOrchestrator*>(hook.get())) {
      for (const auto& child : orchestrator->hooks()) {
        if (auto* checkpointable = dynamic_cast<Checkpointable*>(child.get())) {
          result.push_back(checkpointable);
        }
      }
    } else if (auto* checkpointable = dynamic_cast<Checkpointable*>(hook.get())) {
      result.push_back(checkpointable);
    }
  }
  return result;
}

// ---- Lifecycle ---------------------------------------------------------------------------------

void TrainingStrategy::enter() {
  if (lifecycle_depth_ == 0) {
    std::size_t entered = 0;
    try {
      for (; entered < hooks_.size(); ++entered) hooks_[entered]->enter();
    } catch (...) {
      // Undo the entries that succeeded, in reverse, and report the original error.
      while (entered > 0) {
        try {
          hooks_[--entered]->exit();
        } catch (...) {
        }
      }
      throw;
    }
  }
  ++lifecycle_depth_;
}

void TrainingStrategy::exit() {
  if (lifecycle_depth_ == 0) {
    throw std::logic_error("TrainingStrategy::exit() without a matching enter()");
  }
  if (--lifecycle_depth_ > 0) return;
  // Every hook gets its exit even if one fails; the first failure is reported.
  std::exception_ptr first_error;
  for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) {
    try {
      (*it)->exit();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

TrainingStrategy::Scope::Scope(TrainingStrategy& strategy) : strategy_(strategy) {
  strategy_.enter();
}

TrainingStrategy::Scope::~Scope() {
  if (closed_) return;
  try {
    strategy_.exit();
  } catch (...) {
  }
}

void TrainingStrategy::Scope::close() {
  if (closed_) return;
  closed_ = true;
  strategy_.exit();
}

// ---- State -------------------------------------------------------------------------------------

void TrainingStrategy::set_devices(std::vector<c10::Device> devices) {
  validate_devices(devices, options_.models.size());
  devices_ = std::move(devices);
}

void TrainingStrategy::build_optimizers() {
  if (optimizers_built()) return;
  std::vector<RuntimeOptimizer> built;
  for (std::size_t i = 0; i < options_.optimizer_configs.size(); ++i) {
    const OptimizerConfig& config = options_.optimizer_configs[i];
    const auto model = options_.models.find(config.model_key);
    if (model == options_.models.end() || !model->second) {
      throw std::invalid_argument(unknown_model_message(i, config.model_key, options_.models));
    }
    std::vector<torch::Tensor> parameters;
    for (const auto& parameter : model->second->parameters()) {
      if (parameter.requires_grad()) parameters.push_back(parameter);
    }
    if (parameters.empty()) {
      throw std::invalid_argument("TrainingStrategy: model '" + config.model_key +
                                  "' has no trainable parameters for optimizer config " +
                                  std::to_string(i));
    }
    RuntimeOptimizer runtime;
    runtime.optimizer = config.make_optimizer(std::move(parameters));
    if (!runtime.optimizer) {
      throw std::invalid_argument("TrainingStrategy: make_optimizer of optimizer config " +
                                  std::to_string(i) + " returned null");
    }
    if (config.make_scheduler) runtime.scheduler = config.make_scheduler(*runtime.optimizer);
    runtime.scheduler_metric_key = config.scheduler_metric_key;
    built.push_back(std::move(runtime));
  }
  runtime_optimizers_ = std::move(built);
}

std::vector<torch::optim::Optimizer*> TrainingStrategy::optimizers() const {
  std::vector<torch::optim::Optimizer*> result;
  for (const auto& runtime : runtime_optimizers_) result.push_back(runtime.optimizer.get());
  return result;
}

std::vector<LRScheduler*> TrainingStrategy::lr_schedulers() const {
  std::vector<LRScheduler*> result;
  for (const auto& runtime : runtime_optimizers_) result.push_back(runtime.scheduler.get());
  return result;
}

GradScaler* TrainingStrategy::grad_scaler() const {
  const MixedPrecisionHook* mixed_precision = mixed_precision_hook();
  return mixed_precision != nullptr ? mixed_precision->grad_scaler() : nullptr;
}

void TrainingStrategy::set_counters(const TrainingCounters& counters) {
  if (counters.step_count < 0 || counters.global_step_count < 0 || counters.batch_count < 0 ||
      counters.epoch_step_count < 0 || counters.epoch < 0) {
    throw std::invalid_argument("TrainingStrategy::set_counters: counters must not be negative");
  }
  counters_ = counters;
}

void TrainingStrategy::set_communicator(std::shared_ptr<Communicator> communicator) {
  communicator_ =
      communicator ? std::move(communicator) : std::make_shared<SingleProcessCommunicator>();
}

// ---- Dispatch ----------------------------------------------------------------------------------

TrainContext TrainingStrategy::make_context(const TrainingBatch* batch) {
  TrainContext ctx;
  ctx.batch = batch;
  ctx.workflow = this;
  ctx.models = &options_.models;
  ctx.optimizers = optimizers();
  ctx.lr_schedulers = lr_schedulers();
  ctx.counters = counters_;
  ctx.global_rank = communicator_->rank();
  ctx.validation = last_validation_;
  return ctx;
}

void TrainingStrategy::dispatch(TrainingStage stage, TrainContext& ctx) {
  // A copy: a hook may register another while it runs.
  const std::vector<std::shared_ptr<Hook>> hooks = hooks_;
  for (const auto& hook : hooks) {
    // The strategy calls the orchestrator at SETUP although it does not claim it
    // (docs/design.md §4.4), so update hooks can set up too.
    const bool runs = hook->runs_on_stage(stage) ||
                      (stage == TrainingStage::Setup && hook.get() == orchestrator_);
    if (runs && hook->due_at(counters_.step_count)) (*hook)(ctx, stage);
  }
}

void TrainingStrategy::dispatch_outside_batch(TrainingStage stage, const TrainingBatch* batch) {
  TrainContext ctx = make_context(batch);
  dispatch(stage, ctx);
}

bool TrainingStrategy::has_claimant(TrainingStage stage) const {
  for (const auto& hook : hooks_) {
    if (hook->runs_on_stage(stage)) return true;
  }
  return false;
}

void TrainingStrategy::prepare_and_move_models() {
  const std::vector<std::shared_ptr<Hook>> hooks = hooks_;
  for (const auto& hook : hooks) hook->prepare(*this);
  if (options_.models.size() > 1 && devices_.size() > 1) {
    throw std::invalid_argument(
        "Named-model training with multiple devices is unsupported; give TrainingStrategy one "
        "device");
  }
  for (auto& [key, model] : options_.models) model->to(devices_.front());
}

void TrainingStrategy::run_setup_hooks() { dispatch_outside_batch(TrainingStage::Setup, nullptr); }

// ---- Training ----------------------------------------------------------------------------------

void TrainingStrategy::run(const std::vector<TrainingBatch>& batches) {
  if (!options_.num_steps && !options_.num_epochs) {
    throw std::invalid_argument(
        "TrainingStrategy::run() needs num_steps or num_epochs in "
        "TrainingStrategyOptions (train_batch() needs neither)");
  }
  Scope scope(*this);
  prepare_and_move_models();
  run_setup_hooks();

  const auto batches_per_epoch = static_cast<int64_t>(batches.size());
  int64_t target_steps = 0;
  if (options_.num_steps) {
    target_steps = *options_.num_steps;
  } else {
    if (batches_per_epoch <= 0) {
      throw std::invalid_argument(
          "TrainingStrategy::run(): num_epochs needs at least one batch "
          "per epoch; got no batches");
    }
    // The target counts executed optimizer steps (docs/design.md §2.3).
    target_steps = static_cast<int64_t>(std::ceil(static_cast<double>(*options_.num_epochs) *
                                                  static_cast<double>(batches_per_epoch) *
                                                  options_.epoch_step_modifier));
  }
  if (counters_.step_count >= target_steps) {
    scope.close();
    return;
  }
  if (batches_per_epoch > 0 && counters_.epoch_step_count >= batches_per_epoch) {
    throw std::invalid_argument("restart counters are inconsistent: epoch_step_count " +
                                std::to_string(counters_.epoch_step_count) + " is not below the " +
                                std::to_string(batches_per_epoch) + " batches of an epoch");
  }
  build_optimizers();

  {
    const ModelModeGuard modes(options_.models, configured_models(options_.optimizer_configs),
                               /*training=*/true);
    bool first_batch_of_run = true;
    while (counters_.step_count < target_steps) {
      int64_t processed = 0;
      bool epoch_exhausted = false;
      // A resumed run starts mid-epoch: the epoch's first epoch_step_count batches were consumed.
      for (int64_t index = counters_.epoch_step_count; index < batches_per_epoch; ++index) {
        if (counters_.step_count >= target_steps) break;
        last_batch_ = batches[static_cast<std::size_t>(index)].to(devices_.front());
        const TrainingBatch& batch = *last_batch_;
        if (first_batch_of_run) {
          dispatch_outside_batch(TrainingStage::BeforeTraining, &batch);
          first_batch_of_run = false;
        }
        if (counters_.epoch_step_count == 0) {
          dispatch_outside_batch(TrainingStage::BeforeEpoch, &batch);
        }
        train_one_batch(batch);
        ++processed;
        if (counters_.epoch_step_count >= batches_per_epoch) {
          epoch_exhausted = true;
          break;
        }
      }
      if (processed == 0 && counters_.step_count < target_steps) {
        throw std::invalid_argument(
            "TrainingStrategy::run(): the batches produced no batch to "
            "train on; num_steps needs at least one batch");
      }
      if (epoch_exhausted) {
        ++counters_.epoch;
        counters_.epoch_step_count = 0;
        dispatch_outside_batch(TrainingStage::AfterEpoch, &*last_batch_);
      }
    }
    if (!first_batch_of_run) dispatch_outside_batch(TrainingStage::AfterTraining, &*last_batch_);
  }
  scope.close();
}

bool TrainingStrategy::train_batch(const TrainingBatch& batch) {
  Scope scope(*this);
  prepare_and_move_models();
  run_setup_hooks();
  build_optimizers();
  bool step_ran = false;
  {
    const ModelModeGuard modes(options_.models, configured_models(options_.optimizer_configs),
                               /*training=*/true);
    last_batch_ = batch.to(devices_.front());
    step_ran = train_one_batch(*last_batch_);
  }
  scope.close();
  return step_ran;
}

bool TrainingStrategy::train_one_batch(const TrainingBatch& batch) {
  try {
    return run_batch_stages(batch);
  } catch (...) {
    // Autocast is thread-local state: a failed batch must not leave this thread (in LAMMPS, the
    // MD thread) in the mixed-precision region, even when an outer Scope keeps the hooks entered
    // and their exit() does not run yet. MixedPrecisionHook::exit() only leaves the region.
    if (MixedPrecisionHook* mixed_precision = mixed_precision_hook()) mixed_precision->exit();
    throw;
  }
}

bool TrainingStrategy::run_batch_stages(const TrainingBatch& batch) {
  // One context for every stage of this batch (docs/design.md §2.1).
  TrainContext ctx = make_context(&batch);
  dispatch(TrainingStage::BeforeBatch, ctx);
  // With an orchestrator, it zeroes (or not, under a veto) at BEFORE_BATCH.
  if (orchestrator_ == nullptr) zero_gradients(ctx.optimizers);

  dispatch(TrainingStage::BeforeForward, ctx);
  Predictions predictions = options_.training_fn(options_.models, batch);
  dispatch(TrainingStage::AfterForward, ctx);

  dispatch(TrainingStage::BeforeLoss, ctx);
  LossOutput live_losses =
      options_.loss_fn(predictions, batch, counters_.step_count, counters_.epoch);
  if (!live_losses.total_loss.defined()) {
    throw std::logic_error("TrainingStrategy: loss_fn returned an undefined total_loss");
  }
  // Predictions are not on the context (docs/design.md §2.1); dropping them now frees the parts of
  // the forward graph the loss does not use (e.g. the energy's, for a force-only loss) before
  // backward instead of after the step: lower peak memory, and glibc reuses the memory instead of
  // unmapping and faulting it in again (docs/bench-engine-overhead.md).
  predictions.clear();
  ctx.loss = live_losses.total_loss;
  ctx.losses = live_losses;
  dispatch(TrainingStage::AfterLoss, ctx);

  dispatch(TrainingStage::BeforeBackward, ctx);
  if (has_claimant(TrainingStage::DoBackward)) {
    dispatch(TrainingStage::DoBackward, ctx);
  } else {
    // A BEFORE_BACKWARD hook may have replaced ctx.loss.
    backward_and_reduce_gradients(ctx.loss.defined() ? ctx.loss : live_losses.total_loss,
                                  ctx.optimizers, communicator_.get());
  }
  // From here on hooks see the detached, unscaled loss (docs/design.md §2.2).
  ctx.loss = live_losses.total_loss.detach();
  ctx.losses = live_losses.detached();
  live_losses = LossOutput();
  dispatch(TrainingStage::AfterBackward, ctx);

  dispatch(TrainingStage::BeforeOptimizerStep, ctx);
  bool step_ran = true;
  if (has_claimant(TrainingStage::DoOptimizerStep)) {
    dispatch(TrainingStage::DoOptimizerStep, ctx);
    // A plain claimant's step counts as having run (docs/design.md §3.3).
    if (orchestrator_ != nullptr) step_ran = !orchestrator_->optimizer_step_skipped();
  } else {
    step_optimizers(ctx.optimizers);
    step_time_based_schedulers(ctx.lr_schedulers);
  }
  dispatch(TrainingStage::AfterOptimizerStep, ctx);

  // A skipped step consumes the batch but not a step (docs/design.md §2.3).
  ++counters_.batch_count;
  ++counters_.epoch_step_count;
  if (step_ran) {
    ++counters_.step_count;
    counters_.global_step_count += communicator_->size();
  }
  ctx.counters = counters_;
  dispatch(TrainingStage::AfterBatch, ctx);
  return step_ran;
}

// ---- Validation --------------------------------------------------------------------------------

ValidationSummary TrainingStrategy::validate(const std::vector<TrainingBatch>& batches) {
  if (batches.empty()) {
    throw std::invalid_argument("TrainingStrategy::validate() needs at least one batch");
  }
  Scope scope(*this);
  const MixedPrecisionHook* mixed_precision = mixed_precision_hook();
  std::map<std::string, double> sums;
  {
    const ModelModeGuard modes(options_.models, {}, /*training=*/false);
    for (const TrainingBatch& host_batch : batches) {
      const TrainingBatch batch = host_batch.to(devices_.front());
      TrainContext ctx = make_context(&batch);
      // The same precision as training, without touching the GradScaler.
      const AutocastRegion region = mixed_precision != nullptr
                                        ? mixed_precision->inference_region(devices_.front())
                                        : AutocastRegion(devices_.front(), Precision::Float32);
      dispatch(TrainingStage::BeforeForward, ctx);
      const Predictions predictions = options_.training_fn(options_.models, batch);
      dispatch(TrainingStage::AfterForward, ctx);
      const LossOutput losses =
          options_.loss_fn(predictions, batch, counters_.step_count, counters_.epoch);
      sums["total_loss"] += losses.total_loss.detach().item<double>();
      for (const auto& [name, value] : losses.per_component_unweighted) {
        sums["per_component_unweighted/" + name] += value.detach().item<double>();
      }
    }
  }
  // Every rank reduces the same entries in the same (sorted) order.
  double batch_count = communicator_->all_reduce_sum(static_cast<double>(batches.size()));
  ValidationSummary summary;
  for (const auto& [name, sum] : sums) {
    summary[name] = communicator_->all_reduce_sum(sum) / batch_count;
  }
  summary["num_batches"] = batch_count;

  last_validation_ = summary;
  // Fires before metric-driven schedulers consume the summary, and only once training has seen
  // a batch (docs/design.md §3.1).
  if (last_batch_) dispatch_outside_batch(TrainingStage::AfterValidation, &*last_batch_);
  step_metric_driven_schedulers(summary);
  scope.close();
  return summary;
}

void TrainingStrategy::step_metric_driven_schedulers(const ValidationSummary& summary) {
  bool any_metric_driven = false;
  for (std::size_t i = 0; i < runtime_optimizers_.size(); ++i) {
    LRScheduler* scheduler = runtime_optimizers_[i].scheduler.get();
    if (scheduler == nullptr || !scheduler->is_metric_driven()) continue;
    any_metric_driven = true;
    const std::string& key = runtime_optimizers_[i].scheduler_metric_key;
    const auto entry = summary.find(key);
    if (entry == summary.end()) {
      std::string available;
      for (const auto& item : summary) available += (available.empty() ? "" : ", ") + item.first;
      throw std::out_of_range("validation summary has no entry '" + key +
                              "' for the metric-driven schedule of optimizer " + std::to_string(i) +
                              " (entries: " + available + ")");
    }
    scheduler->step_with_metric(entry->second);
  }
  // The summary has been consumed (the reference sets last_validation to None).
  if (any_metric_driven) last_validation_.reset();
}

}  // namespace otf

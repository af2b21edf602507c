#include "training_update_orchestrator.h"

#include <torch/autograd.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

#include "communicator.h"
#include "grad_scaler.h"
#include "lr_scheduler.h"
#include "training_strategy.h"

namespace otf {
namespace {

std::vector<std::shared_ptr<TrainingUpdateHook>> checked_and_sorted(
    std::vector<std::shared_ptr<TrainingUpdateHook>> hooks) {
  std::unordered_set<const TrainingUpdateHook*> seen;
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    if (!hooks[i]) {
      throw std::invalid_argument("TrainingUpdateOrchestrator: update hook " + std::to_string(i) +
                                  " is null");
    }
    if (!seen.insert(hooks[i].get()).second) {
      throw std::invalid_argument(
          "hooks must not contain duplicate hook instances; " + hooks[i]->name() +
          " is registered twice (construct a second instance if two are really wanted)");
    }
  }
  // Stable: hooks of equal priority keep their registration order (docs/design.md §4.4).
  std::stable_sort(hooks.begin(), hooks.end(),
                   [](const auto& a, const auto& b) { return a->priority() < b->priority(); });
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    const auto& key = hooks[i]->exclusive_key();
    if (!key) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (hooks[j]->exclusive_key() == key) {
        throw std::invalid_argument("Only one update hook with exclusive key '" + *key +
                                    "' may be registered; got " + hooks[j]->name() + " and " +
                                    hooks[i]->name() + ".");
      }
    }
  }
  return hooks;
}

Communicator* communicator_of(const TrainContext& ctx) {
  return ctx.workflow != nullptr ? ctx.workflow->communicator().get() : nullptr;
}

}  // namespace

TrainingUpdateOrchestrator::TrainingUpdateOrchestrator(
    std::vector<std::shared_ptr<TrainingUpdateHook>> hooks)
    : Hook(/*frequency=*/1), hooks_(checked_and_sorted(std::move(hooks))) {}

bool TrainingUpdateOrchestrator::runs_on_stage(TrainingStage stage) const {
  return TrainingUpdateHook::runs_on_stage(stage);
}

void TrainingUpdateOrchestrator::operator()(TrainContext& ctx, TrainingStage stage) {
  switch (stage) {
    case TrainingStage::Setup:
      for (const auto& hook : hooks_) hook->call(ctx, stage, /*will_skip=*/false);
      break;
    case TrainingStage::BeforeBatch:
      // A veto here (gradient accumulation) keeps the gradients of earlier micro-batches.
      if (run_gated_pass(ctx, stage)) zero_gradients(ctx.optimizers);
      break;
    case TrainingStage::DoBackward:
      run_backward(ctx);
      break;
    case TrainingStage::DoOptimizerStep: {
      const bool proceed = run_gated_pass(ctx, stage);
      ctx.optimizer_step_vetoed = !proceed;
      optimizer_step_skipped_ = !(proceed && step_optimizers_with_context(ctx));
      break;
    }
    case TrainingStage::AfterOptimizerStep:
      for (const auto& hook : hooks_) hook->call(ctx, stage, optimizer_step_skipped_);
      break;
    default:
      break;  // not an update stage: no child is called (docs/design.md §5.1)
  }
}

bool TrainingUpdateOrchestrator::run_gated_pass(TrainContext& ctx, TrainingStage stage) {
  bool should_run = true;
  for (const auto& hook : hooks_) {
    const UpdateResult result = hook->call(ctx, stage, /*will_skip=*/!should_run);
    should_run = result.proceed && should_run;
  }
  return should_run;
}

void TrainingUpdateOrchestrator::run_backward(TrainContext& ctx) {
  if (!ctx.loss.defined()) {
    throw std::logic_error(
        "TrainingUpdateOrchestrator: ctx.loss is undefined at DO_BACKWARD; there is no loss to "
        "backpropagate");
  }
  // Each child sees the loss the previous one returned, so transforms compose (x0.5 then x4 is
  // x2) and hooks with a lower priority see the untransformed loss (docs/design.md §5.3).
  for (const auto& hook : hooks_) {
    UpdateResult result = hook->call(ctx, TrainingStage::DoBackward, /*will_skip=*/false);
    if (!result.loss.defined()) {
      throw std::logic_error(hook->name() +
                             " did not provide a loss for DO_BACKWARD (UpdateResult::loss is "
                             "undefined); return ctx.loss to leave the loss unchanged.");
    }
    ctx.loss = std::move(result.loss);
  }
  // Exactly once, on the final loss.
  backward_and_reduce_gradients(ctx.loss, ctx.optimizers, communicator_of(ctx));
}

bool TrainingUpdateOrchestrator::step_optimizers_with_context(TrainContext& ctx) const {
  GradScaler* const scaler = ctx.grad_scaler;
  const auto& optimizers = ctx.optimizers;
  std::vector<LRScheduler*> schedulers = ctx.lr_schedulers;
  if (schedulers.size() > optimizers.size()) {
    throw std::logic_error("TrainingUpdateOrchestrator: " + std::to_string(schedulers.size()) +
                           " learning-rate schedulers for " + std::to_string(optimizers.size()) +
                           " optimizers; ctx.lr_schedulers must be aligned with ctx.optimizers");
  }
  schedulers.resize(optimizers.size(), nullptr);

  // Case A: no scaler.
  if (scaler == nullptr) {
    step_optimizers(optimizers);
    step_time_based_schedulers(schedulers);
    return true;
  }

  // Case B, the fast path: a scaler and no schedulers. update() backs the scale off exactly when
  // some optimizer found inf/NaN, so a drop in scale means a skipped step.
  const bool has_scheduler =
      std::any_of(schedulers.begin(), schedulers.end(), [](const LRScheduler* s) { return s; });
  if (!has_scheduler) {
    const double scale_before = scaler->get_scale();
    for (torch::optim::Optimizer* optimizer : optimizers) scaler->step(*optimizer);
    scaler->update();
    return scaler->get_scale() >= scale_before;
  }

  // Case C: a scaler and schedulers. Each scheduler follows its own optimizer: GradScaler::step
  // says whether that optimizer stepped (the reference queries _found_inf_per_device instead).
  std::vector<bool> stepped;
  stepped.reserve(optimizers.size());
  for (torch::optim::Optimizer* optimizer : optimizers) stepped.push_back(scaler->step(*optimizer));
  scaler->update();
  bool all_stepped = true;
  for (std::size_t i = 0; i < optimizers.size(); ++i) {
    if (stepped[i]) {
      step_time_based_schedulers({schedulers[i]});
    } else {
      all_stepped = false;
    }
  }
  // A skip of any optimizer makes the whole batch a skipped step, even though the others stepped
  // (docs/design.md §5.5).
  return all_stepped;
}

void TrainingUpdateOrchestrator::enter() {
  for (const auto& hook : hooks_) hook->enter();
}

void TrainingUpdateOrchestrator::exit() {
  for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) (*it)->exit();
}

std::shared_ptr<TrainingUpdateOrchestrator> compose_update_hooks(
    const std::vector<UpdateHookItem>& items) {
  std::vector<std::shared_ptr<TrainingUpdateHook>> hooks;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (const auto* hook = std::get_if<std::shared_ptr<TrainingUpdateHook>>(&items[i])) {
      hooks.push_back(*hook);
      continue;
    }
    const auto& orchestrator = std::get<std::shared_ptr<TrainingUpdateOrchestrator>>(items[i]);
    if (!orchestrator) {
      throw std::invalid_argument("compose_update_hooks: item " + std::to_string(i) + " is null");
    }
    hooks.insert(hooks.end(), orchestrator->hooks().begin(), orchestrator->hooks().end());
  }
  return std::make_shared<TrainingUpdateOrchestrator>(std::move(hooks));
}

std::shared_ptr<TrainingUpdateOrchestrator> operator+(std::shared_ptr<TrainingUpdateHook> a,
                                                      std::shared_ptr<TrainingUpdateHook> b) {
  return compose_update_hooks({std::move(a), std::move(b)});
}

std::shared_ptr<TrainingUpdateOrchestrator> operator+(
    std::shared_ptr<TrainingUpdateHook> a, std::shared_ptr<TrainingUpdateOrchestrator> b) {
  return compose_update_hooks({std::move(a), std::move(b)});
}

std::shared_ptr<TrainingUpdateOrchestrator> operator+(std::shared_ptr<TrainingUpdateOrchestrator> a,
                                                      std::shared_ptr<TrainingUpdateHook> b) {
  return compose_update_hooks({std::move(a), std::move(b)});
}

std::shared_ptr<TrainingUpdateOrchestrator> operator+(
    std::shared_ptr<TrainingUpdateOrchestrator> a, std::shared_ptr<TrainingUpdateOrchestrator> b) {
  return compose_update_hooks({std::move(a), std::move(b)});
}

void zero_gradients(const std::vector<torch::optim::Optimizer*>& optimizers) {
  for (torch::optim::Optimizer* optimizer : optimizers) {
    for (auto& group : optimizer->param_groups()) {
      for (auto& parameter : group.params()) parameter.mutable_grad().reset();
    }
  }
}

std::vector<torch::Tensor> optimizer_parameters(
    const std::vector<torch::optim::Optimizer*>& optimizers) {
  std::vector<torch::Tensor> parameters;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const torch::optim::Optimizer* optimizer : optimizers) {
    for (const auto& group : optimizer->param_groups()) {
      for (const auto& parameter : group.params()) {
        if (seen.insert(parameter.unsafeGetTensorImpl()).second) parameters.push_back(parameter);
      }
    }
  }
  return parameters;
}

void backward_and_reduce_gradients(const torch::Tensor& loss,
                                   const std::vector<torch::optim::Optimizer*>& optimizers,
                                   Communicator* communicator) {
  if (communicator == nullptr || communicator->size() <= 1) {
    loss.backward();
    return;
  }
  std::vector<torch::Tensor> parameters = optimizer_parameters(optimizers);
  std::vector<torch::Tensor> accumulated(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    accumulated[i] = parameters[i].grad();
    parameters[i].mutable_grad().reset();
  }
  try {
    loss.backward();
    all_reduce_gradients(*communicator, parameters);
  } catch (...) {
    // Leave the accumulated gradients as they were.
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      parameters[i].mutable_grad() = accumulated[i];
    }
    throw;
  }
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!accumulated[i].defined()) continue;
    torch::Tensor& grad = parameters[i].mutable_grad();
    if (grad.defined()) {
      grad.add_(accumulated[i]);
    } else {
      grad = accumulated[i];
    }
  }
}

void step_optimizers(const std::vector<torch::optim::Optimizer*>& optimizers) {
  for (torch::optim::Optimizer* optimizer : optimizers) optimizer->step();
}

void step_time_based_schedulers(const std::vector<LRScheduler*>& schedulers) {
  for (LRScheduler* scheduler : schedulers) {
    if (scheduler != nullptr && !scheduler->is_metric_driven()) scheduler->step();
  }
}

}  // namespace otf

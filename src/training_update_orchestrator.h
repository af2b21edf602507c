// The one hook that owns an optimizer update when update hooks are registered: it runs them in
// priority order, composes their vetoes, threads the loss through them, and itself performs
// zero_grad, backward (with the data-parallel gradient sum), the optimizer and scheduler steps and
// the GradScaler step/update (docs/design.md §4.4 and §5).
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <memory>
#include <variant>
#include <vector>

#include "hook.h"
#include "training_update_hook.h"

namespace otf {

class Communicator;
class LRScheduler;

class TrainingUpdateOrchestrator final : public Hook {
 public:
  // Stable-sorted by priority (ties keep their order). Throws std::invalid_argument for a null
  // hook, the same instance twice, or two hooks sharing an exclusive key ("Only one update hook
  // with exclusive key 'K' may be registered; got A and B."). Empty is allowed.
  explicit TrainingUpdateOrchestrator(std::vector<std::shared_ptr<TrainingUpdateHook>> hooks = {});

  // The four update stages; SETUP is forwarded too, because the strategy calls the orchestrator
  // at SETUP explicitly (docs/design.md §4.4).
  bool runs_on_stage(TrainingStage stage) const override;
  void operator()(TrainContext& ctx, TrainingStage stage) override;

  // Children in priority order; exit() in reverse.
  void enter() override;
  void exit() override;

  // Whether the last DO_OPTIMIZER_STEP did not step: vetoed by a hook, or any optimizer skipped by
  // the GradScaler for inf/NaN gradients. False before the first step.
  bool optimizer_step_skipped() const { return optimizer_step_skipped_; }

  // In priority order.
  const std::vector<std::shared_ptr<TrainingUpdateHook>>& hooks() const { return hooks_; }

 private:
  // One veto pass at BEFORE_BATCH or DO_OPTIMIZER_STEP: every child is called (no short-circuit)
  // with will_skip = "someone before you vetoed"; any false wins (docs/design.md §5.2).
  bool run_gated_pass(TrainContext& ctx, TrainingStage stage);
  void run_backward(TrainContext& ctx);
  // Cases A, B and C of docs/design.md §5.4; returns whether the step ran.
  bool step_optimizers_with_context(TrainContext& ctx) const;

  std::vector<std::shared_ptr<TrainingUpdateHook>> hooks_;
  bool optimizer_step_skipped_ = false;
};

// Something that composes into an orchestrator: an update hook or an orchestrator (whose children
// are taken, flattened).
using UpdateHookItem =
    std::variant<std::shared_ptr<TrainingUpdateHook>, std::shared_ptr<TrainingUpdateOrchestrator>>;

// A new orchestrator over every item's hooks, sorted as the constructor sorts them (the
// reference's TrainingUpdateOrchestrator(*hooks) flattening nested orchestrators).
std::shared_ptr<TrainingUpdateOrchestrator> compose_update_hooks(
    const std::vector<UpdateHookItem>& items);

// hook + hook, hook + orchestrator, orchestrator + hook and orchestrator + orchestrator all give a
// new flattened orchestrator; the hooks keep their identity.
std::shared_ptr<TrainingUpdateOrchestrator> operator+(std::shared_ptr<TrainingUpdateHook> a,
                                                      std::shared_ptr<TrainingUpdateHook> b);
std::shared_ptr<TrainingUpdateOrchestrator> operator+(
    std::shared_ptr<TrainingUpdateHook> a, std::shared_ptr<TrainingUpdateOrchestrator> b);
std::shared_ptr<TrainingUpdateOrchestrator> operator+(std::shared_ptr<TrainingUpdateOrchestrator> a,
                                                      std::shared_ptr<TrainingUpdateHook> b);
std::shared_ptr<TrainingUpdateOrchestrator> operator+(
    std::shared_ptr<TrainingUpdateOrchestrator> a, std::shared_ptr<TrainingUpdateOrchestrator> b);

// The update steps, shared by the orchestrator and the strategy's default path (no update hooks).

// zero_grad(set_to_none=True) on every optimizer: gradients become undefined, not zero, so the next
// backward writes them instead of adding (LibTorch 1.13's Optimizer::zero_grad only zeroes).
void zero_gradients(const std::vector<torch::optim::Optimizer*>& optimizers);
// Every parameter of every group of every optimizer, each once, in order.
std::vector<torch::Tensor> optimizer_parameters(
    const std::vector<torch::optim::Optimizer*>& optimizers);
// loss.backward(); with a communicator of more than one rank, then sums this backward's gradient
// contribution over the ranks (otf::all_reduce_gradients), before anyone unscales or steps.
// Gradients accumulated by earlier micro-batches were summed when they were computed, so they are
// set aside during the reduction and added back: only the new contribution is reduced, as DDP's
// per-backward bucket reduction does. communicator may be null (single process).
void backward_and_reduce_gradients(const torch::Tensor& loss,
                                   const std::vector<torch::optim::Optimizer*>& optimizers,
                                   Communicator* communicator);
void step_optimizers(const std::vector<torch::optim::Optimizer*>& optimizers);
// step() on every scheduler that is set and not metric-driven (those step after validation).
void step_time_based_schedulers(const std::vector<LRScheduler*>& schedulers);

}  // namespace otf

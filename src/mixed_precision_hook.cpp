#include "mixed_precision_hook.h"

#include <torch/autograd.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "communicator.h"
#include "training_strategy.h"

namespace otf {
namespace {

constexpr const char* kAcceptedPrecisions =
    "MixedPrecisionHook.precision must be one of (float32, bfloat16, float16)";

Precision parse_hook_precision(std::string_view text) {
  try {
    return parse_precision(text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string(kAcceptedPrecisions) + "; got '" + std::string(text) +
                                "' (the aliases fp32, bf16, fp16 and a 'torch.' prefix are also "
                                "accepted, in any letter case).");
  }
}

Precision hook_precision_from_dtype(c10::ScalarType dtype) {
  try {
    return precision_from_dtype(dtype);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string(kAcceptedPrecisions) + "; got " + c10::toString(dtype) +
                                ".");
  }
}

GradScalerOptions validated(GradScalerOptions options) {
  // Fail at construction, not at the first float16 batch.
  check_grad_scaler_options(options);
  return options;
}

}  // namespace

MixedPrecisionHook::MixedPrecisionHook(Precision precision, GradScalerOptions scaler_options)
    : TrainingUpdateHook(kPriority, std::string(kExclusiveKey)),
      precision_(precision),
      scaler_options_(validated(scaler_options)) {}

MixedPrecisionHook::MixedPrecisionHook(std::string_view precision, GradScalerOptions scaler_options)
    : MixedPrecisionHook(parse_hook_precision(precision), scaler_options) {}

MixedPrecisionHook::MixedPrecisionHook(c10::ScalarType precision, GradScalerOptions scaler_options)
    : MixedPrecisionHook(hook_precision_from_dtype(precision), scaler_options) {}

MixedPrecisionHook::~MixedPrecisionHook() = default;

UpdateResult MixedPrecisionHook::call(TrainContext& ctx, TrainingStage stage, bool will_skip) {
  const bool scaled = needs_grad_scaler(precision_);
  switch (stage) {
    case TrainingStage::BeforeBatch:
      unscaled_optimizers_.clear();
      if (scaled) ctx.grad_scaler = &ensure_grad_scaler(ctx);
      enter_autocast(ctx);
      return {true, ctx.loss};
    case TrainingStage::DoBackward:
      // Forward, forces and losses ran inside the region; backward must not (autocast_region.h).
      exit_autocast();
      if (scaled && ctx.loss.defined()) {
        GradScaler& scaler = ensure_grad_scaler(ctx);
        ctx.grad_scaler = &scaler;
        return {true, scaler.scale(ctx.loss)};
      }
      return {true, ctx.loss};
    case TrainingStage::DoOptimizerStep:
      if (scaled) {
        GradScaler& scaler = ensure_grad_scaler(ctx);
        ctx.grad_scaler = &scaler;
        // Gradients stay scaled while an earlier hook vetoes (accumulation keeps adding scaled
        // gradients); every optimizer is unscaled before any steps (docs/design.md §7.5).
        if (!will_skip) {
          for (torch::optim::Optimizer* optimizer : ctx.optimizers) {
            scaler.unscale_(*optimizer);
            unscaled_optimizers_.push_back(optimizer);
          }
        }
      }
      return {true, ctx.loss};
    case TrainingStage::AfterOptimizerStep:
      exit_autocast();
      if (ctx.optimizer_step_vetoed) undo_unscale_after_veto();
      unscaled_optimizers_.clear();
      return {true, ctx.loss};
    default:
      return {true, ctx.loss};
  }
}

void MixedPrecisionHook::exit() { exit_autocast(); }

AutocastRegion MixedPrecisionHook::inference_region(c10::Device device) const {
  return AutocastRegion(device, precision_);
}

GradScaler& MixedPrecisionHook::ensure_grad_scaler(const TrainContext& ctx) {
  // The scale tensor is created on the device of the first scaled loss, i.e. devices()[0].
  if (!scaler_) scaler_ = std::make_unique<GradScaler>(scaler_options_);
  const std::shared_ptr<Communicator> communicator =
      ctx.workflow != nullptr ? ctx.workflow->communicator() : nullptr;
  if (communicator && communicator->size() > 1 && reducer_communicator_ != communicator.get()) {
    // Every rank must take the same skip decision, or the replicas diverge.
    scaler_->set_found_inf_reducer(found_inf_reducer(communicator));
    reducer_communicator_ = communicator.get();
  }
  return *scaler_;
}

void MixedPrecisionHook::enter_autocast(const TrainContext& ctx) {
  if (precision_ == Precision::Float32 || autocast_region_) return;
  autocast_region_ =
      std::make_unique<AutocastRegion>(ctx.devices().at(0), precision_, std::defer_lock);
  autocast_region_->enter();
}

void MixedPrecisionHook::exit_autocast() {
  if (!autocast_region_) return;
  autocast_region_->exit();
  autocast_region_.reset();
}

void MixedPrecisionHook::undo_unscale_after_veto() {
  if (unscaled_optimizers_.empty() || !scaler_) return;
  const torch::Tensor& scale = scaler_->scale_tensor();
  torch::NoGradGuard no_grad;
  for (torch::optim::Optimizer* optimizer : unscaled_optimizers_) {
    for (auto& group : optimizer->param_groups()) {
      for (auto& parameter : group.params()) {
        torch::Tensor& grad = parameter.mutable_grad();
        if (grad.defined()) grad.mul_(scale.to(grad.device()));
      }
    }
  }
  // update(new_scale) forgets the per-optimizer state and changes neither the scale nor the
  // growth tracker (GradScaler::update(double)).
  scaler_->update(scaler_->get_scale());
}

void MixedPrecisionHook::save(torch::serialize::OutputArchive& archive) const {
  if (scaler_) scaler_->save(archive);
}

void MixedPrecisionHook::load(torch::serialize::InputArchive& archive) {
  if (!needs_grad_scaler(precision_)) return;
  c10::IValue scale;
  if (!archive.try_read("scale", scale)) return;  // saved before the scaler existed
  if (!scaler_) scaler_ = std::make_unique<GradScaler>(scaler_options_);
  scaler_->load(archive);
}

}  // namespace otf

// Automatic mixed precision as an update hook: it keeps the forward pass and the losses inside an
// autocast region and, for float16, drives the GradScaler: scaled loss for backward, unscale just
// before the optimizer step, steps that found inf/NaN skipped (docs/design.md §7.5).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <string_view>
#include <vector>

#include "autocast_region.h"
#include "grad_scaler.h"
#include "hook.h"
#include "precision_dtype.h"
#include "training_update_hook.h"

namespace otf {

class Communicator;

// Per stage, when called by the update orchestrator:
//   BEFORE_BATCH          float16: creates the GradScaler on first use, sets ctx.grad_scaler.
//                         bfloat16/float16: enters an autocast region on ctx.devices()[0] unless
//                         one is active. Never vetoes zeroing.
//   DO_BACKWARD           exits the region (backward runs outside autocast); float16: returns
//                         the scaled loss for the orchestrator's backward().
//   DO_OPTIMIZER_STEP     float16: unless will_skip (an earlier hook vetoed), unscales every
//                         optimizer in ctx.optimizers, in list order, so that later hooks
//                         (clipping, 30) see unscaled gradients. Never vetoes.
//   AFTER_OPTIMIZER_STEP  exits the region again as a safety net; undoes the unscale when a
//                         later hook vetoed the step (see below).
//   anything else         nothing.
// float32 creates neither a region nor a scaler. float16 on CPU (emulated by AutocastRegion)
// neither warns nor throws and goes through the same scaler path.
//
// Deliberate differences from the reference toolkit:
// * exit() (leaving the strategy's lifecycle) exits an active region but KEEPS the GradScaler,
//   and the hook is Checkpointable: the scale and growth tracker are checkpointed and a resumed
//   float16 run continues from them instead of restarting at 65536 (the reference drops the
//   scaler on exit and does not checkpoint it, docs/design.md §8.4).
// * A hook with a priority above 20 that vetoes DO_OPTIMIZER_STEP after this hook unscaled would
//   leave PyTorch's per-optimizer "unscaled" state set, and the next step would throw "unscale_()
//   has already been called on this optimizer since the last update()" (docs/design.md §7.6).
//   Here the hook that unscaled undoes it at AFTER_OPTIMIZER_STEP: gradients are multiplied back
//   by the scale (exact for the scaler's power-of-two scales) and the scaler's per-optimizer state
//   is reset with update(get_scale()), which keeps the scale and the growth tracker. The vetoed
//   iteration is then as if the unscale never happened, and accumulation stays correct.
class MixedPrecisionHook final : public TrainingUpdateHook, public Checkpointable {
 public:
  // After gradient-accumulation transforms (10), before clipping (30) and spike skipping (40).
  static constexpr int kPriority = 20;
  // A strategy may hold only one: two would scale the loss twice.
  static constexpr const char* kExclusiveKey = "MixedPrecisionHook";

  // scaler_options: PyTorch's defaults (init_scale 65536, growth 2, backoff 0.5, interval 2000);
  // used for float16 only. Throws std::invalid_argument for options GradScaler rejects.
  explicit MixedPrecisionHook(Precision precision, GradScalerOptions scaler_options = {});
  // "float32", "bfloat16", "float16", "fp32", "bf16", "fp16" (optional "torch.", any case);
  // anything else throws std::invalid_argument listing them.
  explicit MixedPrecisionHook(std::string_view precision, GradScalerOptions scaler_options = {});
  // torch::kFloat32, torch::kBFloat16, torch::kFloat16; anything else (kFloat64...) throws.
  explicit MixedPrecisionHook(c10::ScalarType precision, GradScalerOptions scaler_options = {});
  ~MixedPrecisionHook() override;

  Precision precision() const { return precision_; }
  const GradScalerOptions& grad_scaler_options() const { return scaler_options_; }

  UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip) override;
  // Exits an active autocast region; keeps the GradScaler (see above).
  void exit() override;

  // The float16 GradScaler; nullptr before the first float16 BEFORE_BATCH (or load()) and for
  // the other precisions. For checkpoints and diagnostics.
  GradScaler* grad_scaler() const { return scaler_.get(); }
  // Whether this hook's autocast region is entered (from BEFORE_BATCH until DO_BACKWARD).
  bool autocast_active() const { return autocast_region_ != nullptr; }

  // An entered autocast region for inference (validation) on `device` in this precision; a no-op
  // region for float32. Never touches the GradScaler.
  AutocastRegion inference_region(c10::Device device) const;

  // The GradScaler's state (nothing for float32/bfloat16 or before the scaler exists). load()
  // creates the float16 scaler if needed, so a resumed run starts from the saved scale.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  GradScaler& ensure_grad_scaler(const TrainContext& ctx);
  void enter_autocast(const TrainContext& ctx);
  void exit_autocast();
  void undo_unscale_after_veto();

  Precision precision_;
  GradScalerOptions scaler_options_;
  std::unique_ptr<GradScaler> scaler_;
  // Exists exactly while entered (the reference's _autocast_ctx and _active).
  std::unique_ptr<AutocastRegion> autocast_region_;
  // Optimizers unscaled at this iteration's DO_OPTIMIZER_STEP; cleared at AFTER_OPTIMIZER_STEP.
  std::vector<torch::optim::Optimizer*> unscaled_optimizers_;
  // The communicator whose found-inf reducer the scaler has, so each is installed once.
  const Communicator* reducer_communicator_ = nullptr;
};

}  // namespace otf

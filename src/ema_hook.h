// An exponential moving average of a model's weights, updated after each executed optimizer step,
// for inference on smoother weights than the last iterate (the reference's EMAHook, with
// PyTorch's AveragedModel/get_ema_multi_avg_fn semantics; docs/design.md §5.8).
#pragma once

#include <torch/nn/module.h>
#include <torch/ordered_dict.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "hook.h"
#include "train_context.h"
#include "training_stage.h"
#include "training_update_hook.h"

namespace otf {

// Tensors by their name in the model (Module::named_parameters() / named_buffers(), recursive).
using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

// The reference's fields and defaults: EMAHook(model_key="main", decay=0.999, update_every=1,
// start_step=0, use_buffers=True).
struct EmaOptions {
  // The model in ctx.models to average. Surrounding whitespace is ignored; must not be empty.
  std::string model_key = "main";
  // averaged = decay * averaged + (1 - decay) * current; in [0, 1). 0 tracks the model exactly.
  double decay = 0.999;
  // Update when the completed step count (step_count + 1) is a multiple of this (> 0). A global
  // modulo, not counted from start_step, as in the reference.
  int64_t update_every = 1;
  // No update before this many completed steps (>= 0).
  int64_t start_step = 0;
  // Average the buffers too (AveragedModel's use_buffers=True); false copies them from the model
  // at each update instead.
  bool use_buffers = true;
};

// Per stage, when called by the update orchestrator:
//   SETUP                 builds the averaged copy of ctx.models->at(model_key) unless it exists
//                         (SETUP fires on every run() and train_batch(): idempotent), applying a
//                         checkpoint loaded before; otherwise aligns the copy with the model's
//                         device and floating dtype. Does not update.
//   AFTER_OPTIMIZER_STEP  unless will_skip (the step was vetoed or skipped by the GradScaler),
//                         with completed = ctx.counters.step_count + 1 (counters are still
//                         pre-increment): if completed >= start_step and completed %
//                         update_every == 0, builds the copy if needed, updates it and counts
//                         num_updates. The first update after building copies the model
//                         (AveragedModel: n_averaged == 0); later ones average.
//   anything else         nothing. Never vetoes, never touches gradients or optimizers.
//
// The averaged copy is a set of named tensors (parameters and buffers, deep copies sharing no
// storage with the model), not a cloned Module: Module::clone() works only for modules derived
// from torch::nn::Cloneable<T>, and a potential is usually a plain torch::nn::Module subclass
// (the reference deep-copies any nn.Module). copy_averaged_to() loads the averages into a module
// of the same architecture, e.g. a second instance used for validation or export.
// The reference also publishes the averaged module as the strategy's inference model; this
// strategy has no such slot yet.
class EmaHook final : public TrainingUpdateHook, public Checkpointable {
 public:
  // After every hook that shapes the step (accumulation 10 ... spike skipping 40).
  static constexpr int kPriority = 50;

  // Throws std::invalid_argument for a field outside its range (see EmaOptions).
  explicit EmaHook(EmaOptions options = {});
  // The rules the constructor applies, for callers that check settings before building the hook.
  static void check_options(const EmaOptions& options);

  const EmaOptions& options() const { return options_; }
  // Updates applied so far (restored by load()).
  int64_t num_updates() const { return num_updates_; }
  // Whether the averaged copy exists (after SETUP or the first update).
  bool initialized() const { return averaged_.has_value(); }

  // The averages, by the model's parameter and buffer names. Throw std::runtime_error ("EmaHook
  // has not initialized ...") before initialization.
  const NamedTensors& averaged_parameters() const;
  const NamedTensors& averaged_buffers() const;
  // Copies the averaged parameters and buffers into `module` (same names and shapes; values are
  // converted to the module's dtype and device). Throws std::runtime_error before initialization,
  // std::invalid_argument when the module does not match.
  void copy_averaged_to(torch::nn::Module& module) const;

  UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip) override;

  // Keys: the EmaOptions fields by name, "num_updates", and when averages exist (live, or loaded
  // and not yet applied) "averaged_parameters" and "averaged_buffers" (dicts name -> tensor) and
  // "n_averaged". load() first checks every option present against the constructor's and throws
  // std::invalid_argument ("EmaHook checkpoint conflict: decay=0.9 vs constructor decay=0.999;
  // ...") on a difference, changing nothing. It then restores num_updates; averages are copied
  // into the live copy at once (shapes checked), or kept and applied when the copy is built, before
  // any update; a checkpoint without averages clears them, so the next SETUP rebuilds from the
  // model.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  // AveragedModel's module state and its n_averaged counter.
  struct AveragedState {
    NamedTensors parameters;
    NamedTensors buffers;
    int64_t n_averaged = 0;
  };

  const torch::nn::Module& source_model(const TrainContext& ctx) const;
  const AveragedState& initialized_state() const;
  void initialize(const torch::nn::Module& model);
  // Checks that the model still has the copy's names and shapes, then moves/casts the copy to the
  // model's device and floating dtypes.
  void align_with_model(const torch::nn::Module& model);
  void update(const torch::nn::Module& model);
  bool due_after_step(int64_t step_count) const;

  EmaOptions options_;
  int64_t num_updates_ = 0;
  std::optional<AveragedState> averaged_;
  // Loaded before the copy existed; applied by initialize().
  std::optional<AveragedState> pending_;
};

}  // namespace otf

// Plain training hooks: small objects the strategy calls at chosen stages, with their lifecycle
// and, for hooks with state worth resuming, a checkpoint interface (docs/design.md §4.1). Update
// hooks, which compose vetoes and losses, are in training_update_hook.h.
#pragma once

#include <torch/serialize/archive.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <typeinfo>
#include <utility>

#include "train_context.h"
#include "training_stage.h"

namespace otf {

class TrainingStrategy;

class Hook {
 public:
  // Runs on `stage` (or on each of `stages`) when step_count % frequency == 0.
  explicit Hook(TrainingStage stage, int frequency = 1);
  explicit Hook(std::set<TrainingStage> stages, int frequency = 1);
  virtual ~Hook() = default;

  // A hook is an identity (the strategy rejects the same instance twice): no copies.
  Hook(const Hook&) = delete;
  Hook& operator=(const Hook&) = delete;

  // Whether the hook fires on `stage`. The default asks stages(); an override replaces that test
  // entirely, even when stages are also set (the reference's _runs_on_stage; docs/design.md §4.1).
  virtual bool runs_on_stage(TrainingStage stage) const;
  virtual void operator()(TrainContext& ctx, TrainingStage stage) = 0;

  // The strategy's lifecycle (docs/design.md §4.5): enter() on the first entry of the strategy, in
  // list order; exit() when it is left, in reverse order. exit() also runs when a run ends by an
  // exception, so it should not throw.
  virtual void enter() {}
  virtual void exit() {}
  // Called before models are moved to the devices on every run() and train_batch() (the
  // reference's prepare_strategy; a data-parallel hook changes the devices here).
  virtual void prepare(TrainingStrategy& /*strategy*/) {}

  // For messages: the class name without the otf:: prefix.
  virtual std::string name() const;

  int frequency() const { return frequency_; }
  // Validated at registration, not here (the registry's rule: positive; docs/design.md §4.4).
  void set_frequency(int frequency) { frequency_ = frequency; }
  // The frequency gate uses the optimizer-step counter, never batch_count (docs/design.md §4.1):
  // while gradient accumulation parks step_count on a multiple of N, a frequency-N hook fires every
  // batch.
  bool due_at(int64_t step_count) const { return frequency_ > 0 && step_count % frequency_ == 0; }

  const std::set<TrainingStage>& stages() const { return stages_; }
  // register_hook(hook, stage) assigns the stage this way.
  void set_stages(std::set<TrainingStage> stages) { stages_ = std::move(stages); }

 protected:
  // For hooks that override runs_on_stage, or get their stage from register_hook.
  explicit Hook(int frequency = 1);

 private:
  std::set<TrainingStage> stages_;
  int frequency_;
};

// A hook from a callable: for short observers (a logger, a test recorder) that need no class.
class CallbackHook final : public Hook {
 public:
  using Callback = std::function<void(TrainContext& ctx, TrainingStage stage)>;
  CallbackHook(TrainingStage stage, Callback callback, int frequency = 1);
  CallbackHook(std::set<TrainingStage> stages, Callback callback, int frequency = 1);
  void operator()(TrainContext& ctx, TrainingStage stage) override;

 private:
  Callback callback_;
};

// Implemented by hooks (plain or update) whose state must survive a restart (the reference's
// CheckpointableHook protocol: state_dict/load_state_dict). Give each its own archive: keys are
// plain names.
class Checkpointable {
 public:
  virtual ~Checkpointable() = default;
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

// The demangled name of a type without a leading "otf::" ("MixedPrecisionHook").
std::string readable_type_name(const std::type_info& type);

}  // namespace otf

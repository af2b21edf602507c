// Small building blocks shared by the training-engine tests: a linear model and its batches, a
// strategy factory, recording hooks, a counting schedule. Header-only; each test executable
// includes it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "communicator.h"
#include "hook.h"
#include "lr_scheduler.h"
#include "train_context.h"
#include "training_batch.h"
#include "training_stage.h"
#include "training_strategy.h"
#include "training_update_hook.h"

namespace otf::testing {

// energy = w . x, no bias: gradients are easy to compute by hand.
struct LinearModel : torch::nn::Module {
  explicit LinearModel(int64_t inputs = 3) {
    linear = register_module("linear",
                             torch::nn::Linear(torch::nn::LinearOptions(inputs, 1).bias(false)));
  }
  torch::nn::Linear linear{nullptr};
};

inline std::shared_ptr<LinearModel> linear_model(std::vector<float> weights) {
  auto model = std::make_shared<LinearModel>(static_cast<int64_t>(weights.size()));
  torch::NoGradGuard no_grad;
  model->linear->weight.copy_(torch::tensor(weights).reshape({1, -1}));
  return model;
}

// "x" [frames, 3] and "energy" [frames]. Inputs are O(0.1) so that float16 gradients scaled by
// GradScaler's default 65536 stay below fp16's 65504 (larger ones overflow for real under the CPU
// emulation, and the steps are skipped).
inline TrainingBatch linear_batch(int64_t frames = 4, int64_t seed = 0) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  const torch::Tensor x = 0.1 * torch::randn({frames, 3});
  const torch::Tensor energy = x.matmul(torch::tensor({1.0f, -2.0f, 0.5f}));
  return TrainingBatch({{"x", x}, {"energy", energy}});
}

inline std::vector<TrainingBatch> linear_batches(int64_t count) {
  std::vector<TrainingBatch> batches;
  for (int64_t i = 0; i < count; ++i) batches.push_back(linear_batch(4, 100 + i));
  return batches;
}

inline Predictions linear_training_fn(const NamedModels& models, const TrainingBatch& batch) {
  auto& model = *models.at("main")->as<LinearModel>();
  return {{"energy", model.linear(batch.at("x")).squeeze(-1)}};
}

// Mean squared energy error; the component is reported as "energy".
inline LossOutput energy_mse_loss(const Predictions& predictions, const TrainingBatch& batch,
                                  int64_t /*step*/, int64_t /*epoch*/) {
  LossOutput out;
  out.total_loss =
      torch::mse_loss(predictions.at("energy").to(torch::kFloat32), batch.at("energy"));
  out.per_component_unweighted["energy"] = out.total_loss;
  out.per_component_weight["energy"] = 1.0;
  return out;
}

inline OptimizerConfig sgd_config(double learning_rate = 0.1, std::string model_key = "main") {
  OptimizerConfig config;
  config.model_key = std::move(model_key);
  config.make_optimizer = [learning_rate](std::vector<torch::Tensor> parameters) {
    return std::make_unique<torch::optim::SGD>(std::move(parameters),
                                               torch::optim::SGDOptions(learning_rate));
  };
  return config;
}

// A one-model linear strategy over SGD(0.1); callers adjust the options.
inline TrainingStrategyOptions linear_options(std::vector<HookEntry> hooks = {},
                                              std::shared_ptr<LinearModel> model = nullptr) {
  TrainingStrategyOptions options;
  options.models["main"] = model ? std::move(model) : linear_model({0.1f, 0.2f, 0.3f});
  options.training_fn = linear_training_fn;
  options.loss_fn = energy_mse_loss;
  options.optimizer_configs = {sgd_config()};
  options.num_epochs = 1;
  options.hooks = std::move(hooks);
  return options;
}

// Records every stage it sees (all eighteen), with an optional callback.
class StageRecorder final : public Hook {
 public:
  using Callback = std::function<void(TrainContext&, TrainingStage)>;
  explicit StageRecorder(Callback callback = nullptr) : callback_(std::move(callback)) {}
  bool runs_on_stage(TrainingStage stage) const override {
    return stage != TrainingStage::DoBackward && stage != TrainingStage::DoOptimizerStep;
  }
  void operator()(TrainContext& ctx, TrainingStage stage) override {
    stages.push_back(stage);
    if (callback_) callback_(ctx, stage);
  }
  std::vector<TrainingStage> stages;

 private:
  Callback callback_;
};

// An update hook with a chosen priority that records what it is called with and can veto or
// transform the loss.
class ScriptedUpdateHook final : public TrainingUpdateHook {
 public:
  struct Call {
    TrainingStage stage;
    bool will_skip;
  };
  using VetoRule = std::function<bool(TrainingStage stage, int64_t call_index)>;

  explicit ScriptedUpdateHook(int priority = kDefaultPriority, std::string label = "",
                              std::optional<std::string> exclusive_key = std::nullopt)
      : TrainingUpdateHook(priority, std::move(exclusive_key)), label(std::move(label)) {}

  UpdateResult call(TrainContext& ctx, TrainingStage stage, bool will_skip) override {
    calls.push_back({stage, will_skip});
    if (log != nullptr) log->push_back(label + ":" + to_string(stage));
    if (on_call) on_call(ctx, stage, will_skip);
    bool proceed = true;
    if (veto) proceed = !veto(stage, stage_calls(stage) - 1);
    if (stage == TrainingStage::DoBackward && loss_factor) {
      return {proceed, ctx.loss * *loss_factor};
    }
    if (stage == TrainingStage::DoBackward && return_undefined_loss) return {proceed, {}};
    return {proceed, ctx.loss};
  }
  void enter() override {
    if (log != nullptr) log->push_back("enter:" + label);
  }
  void exit() override {
    if (log != nullptr) log->push_back("exit:" + label);
  }
  std::string name() const override { return label.empty() ? TrainingUpdateHook::name() : label; }

  int64_t stage_calls(TrainingStage stage) const {
    int64_t count = 0;
    for (const Call& call : calls) count += call.stage == stage ? 1 : 0;
    return count;
  }
  std::vector<bool> will_skip_at(TrainingStage stage) const {
    std::vector<bool> result;
    for (const Call& call : calls) {
      if (call.stage == stage) result.push_back(call.will_skip);
    }
    return result;
  }

  std::string label;
  std::vector<Call> calls;
  VetoRule veto;
  std::optional<double> loss_factor;
  bool return_undefined_loss = false;
  std::vector<std::string>* log = nullptr;
  std::function<void(TrainContext&, TrainingStage, bool)> on_call;
};

// Vetoes BEFORE_BATCH and DO_OPTIMIZER_STEP on every batch but each `every`-th: gradient
// accumulation over `every` batches, as the reference's test helpers do at priority 10.
inline std::shared_ptr<ScriptedUpdateHook> accumulation_hook(int every, int priority = 10,
                                                             std::string label = "accumulate") {
  auto hook = std::make_shared<ScriptedUpdateHook>(priority, std::move(label));
  hook->veto = [every](TrainingStage stage, int64_t call_index) {
    if (stage == TrainingStage::BeforeBatch) return call_index % every != 0;
    if (stage == TrainingStage::DoOptimizerStep) return (call_index + 1) % every != 0;
    return false;
  };
  return hook;
}

// Counts its steps; optionally metric-driven.
class CountingScheduler final : public LRScheduler {
 public:
  explicit CountingScheduler(bool metric_driven = false) : metric_driven_(metric_driven) {}
  bool is_metric_driven() const override { return metric_driven_; }
  void step() override { ++steps; }
  void step_with_metric(double metric) override { metrics.push_back(metric); }
  double current_lr() const override { return 0.0; }
  void save(torch::serialize::OutputArchive& /*archive*/) const override {}
  void load(torch::serialize::InputArchive& /*archive*/) override {}

  int steps = 0;
  std::vector<double> metrics;

 private:
  bool metric_driven_;
};

// Stands for `size` ranks that all hold the same batch: a sum over ranks is size times the value.
class IdenticalRanksCommunicator final : public Communicator {
 public:
  IdenticalRanksCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors) override {
    torch::NoGradGuard no_grad;
    ++tensor_reductions;
    for (const auto& tensor : tensors) tensor.mul_(size_);
  }
  void all_reduce_max(const std::vector<torch::Tensor>&) override { ++max_reductions; }
  void broadcast(const std::vector<torch::Tensor>&, int) override {}
  double all_reduce_sum(double value) override { return value * size_; }
  // The other ranks have no rows for this one.
  std::vector<torch::Tensor> exchange_rows(const std::vector<torch::Tensor>& send) override {
    std::vector<torch::Tensor> received;
    for (std::size_t r = 0; r < send.size(); ++r)
      received.push_back(static_cast<int>(r) == rank() ? send[r] : send[r].narrow(0, 0, 0));
    return received;
  }
  int tensor_reductions = 0;
  int max_reductions = 0;

 private:
  int rank_;
  int size_;
};

inline std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const auto& tensor : tensors) copies.push_back(tensor.detach().clone());
  return copies;
}

inline bool bitwise_equal(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

template <typename Function>
std::string error_message(Function&& function) {
  try {
    function();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "<no exception>";
}

}  // namespace otf::testing

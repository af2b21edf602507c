#include "training_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/serialize.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <unistd.h>

#include "lr_scheduler.h"
#include "state_archive.h"
#include "training_strategy.h"

namespace otf {
namespace {

const state_archive::StateKind kKind{"otf-torch training state", kTrainingCheckpointFormat,
                                     "training state", "not an OTF-Torch training state"};

torch::Tensor counters_as_tensor(const TrainingCounters& c) {
  return torch::tensor({c.step_count, c.global_step_count, c.batch_count, c.epoch_step_count,
                        c.epoch},
                       torch::kInt64);
}

TrainingCounters counters_from_tensor(const torch::Tensor& t) {
  if (t.numel() != 5) throw std::runtime_error("training state: counters have the wrong size");
  const auto v = t.accessor<int64_t, 1>();
  return TrainingCounters{v[0], v[1], v[2], v[3], v[4]};
}

// LibTorch's default CPU generator: torch::rand, randn, randperm and dropout draw from it.
torch::Tensor cpu_generator_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_cpu_generator_state(const torch::Tensor& state) {
  auto generator = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

void require(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("training state does not match this run: " + what);
}

}  // namespace

std::string save_training_state(const TrainingStrategy& strategy) {
  torch::serialize::OutputArchive archive;
  state_archive::write_header(archive, kKind);
  archive.write("counters", counters_as_tensor(strategy.counters()));
  archive.write("cpu_generator", cpu_generator_state());

  for (const auto& [name, model] : strategy.models()) {
    torch::serialize::OutputArchive model_archive;
    model->save(model_archive);
    archive.write("model/" + name, model_archive);
    // The gradients held between batches: part-way through an accumulation group they are the
    // partial sum the group's next micro-batches add to (docs/design.md §8.3).
    torch::serialize::OutputArchive gradient_archive;
    bool any_gradient = false;
    const auto parameters = model->parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!parameters[i].grad().defined()) continue;
      gradient_archive.write(std::to_string(i), parameters[i].grad());
      any_gradient = true;
    }
    if (any_gradient) archive.write("gradients/" + name, gradient_archive);
  }
  const auto optimizers = strategy.optimizers();
  const auto schedulers = strategy.lr_schedulers();
  archive.write("optimizer_count", c10::IValue(static_cast<int64_t>(optimizers.size())));
  for (size_t i = 0; i < optimizers.size(); ++i) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizers[i]->save(optimizer_archive);
    archive.write("optimizer/" + std::to_string(i), optimizer_archive);
    if (schedulers[i] != nullptr) {
      torch::serialize::OutputArchive scheduler_archive;
      schedulers[i]->save(scheduler_archive);
      archive.write("scheduler/" + std::to_string(i), scheduler_archive);
    }
  }
  const auto hooks = strategy.checkpointable_hooks();
  archive.write("hook_count", c10::IValue(static_cast<int64_t>(hooks.size())));
  for (size_t i = 0; i < hooks.size(); ++i) {
    torch::serialize::OutputArchive hook_archive;
    hooks[i]->save(hook_archive);
    archive.write("hook/" + std::to_string(i), hook_archive);
  }

  return state_archive::to_bytes(archive);
}

void load_training_state(TrainingStrategy& strategy, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  state_archive::load_checked(archive, bytes, kKind);

  for (const auto& [name, model] : strategy.models()) {
    torch::serialize::InputArchive model_archive;
    require(archive.try_read("model/" + name, model_archive), "no model '" + name + "' saved");
    model->load(model_archive);
    // Absent in states saved without gradients (before the first batch, or by older builds).
    torch::serialize::InputArchive gradient_archive;
    if (!archive.try_read("gradients/" + name, gradient_archive)) continue;
    auto parameters = model->parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      torch::Tensor gradient;
      if (!gradient_archive.try_read(std::to_string(i), gradient)) continue;
      require(gradient.sizes() == parameters[i].sizes(),
              "gradient " + std::to_string(i) + " of model '" + name + "' differs in size");
      parameters[i].mutable_grad() = gradient.to(parameters[i].options());
    }
  }
  const int64_t optimizer_count = state_archive::read_int(archive, "optimizer_count", kKind.noun);
  // A state saved before the first batch holds no optimizers: they were not built yet, and a
  // strategy that has not built them either continues alike (it builds them at its first batch).
  if (optimizer_count != 0 || strategy.optimizers_built()) strategy.build_optimizers();
  const auto optimizers = strategy.optimizers();
  const auto schedulers = strategy.lr_schedulers();
  require(optimizer_count == static_cast<int64_t>(optimizers.size()),
          "saved " + std::to_string(optimizer_count) + " optimizers, this run has " +
              std::to_string(optimizers.size()));
  for (size_t i = 0; i < optimizers.size(); ++i) {
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer/" + std::to_string(i), optimizer_archive);
    optimizers[i]->load(optimizer_archive);
    torch::serialize::InputArchive scheduler_archive;
    const bool has_scheduler = archive.try_read("scheduler/" + std::to_string(i), scheduler_archive);
    require(has_scheduler == (schedulers[i] != nullptr),
            "optimizer " + std::to_string(i) + (has_scheduler ? " had" : " had no") +
                " learning-rate schedule when saved");
    if (has_scheduler) schedulers[i]->load(scheduler_archive);
  }
  const auto hooks = strategy.checkpointable_hooks();
  const int64_t hook_count = state_archive::read_int(archive, "hook_count", kKind.noun);
  require(hook_count == static_cast<int64_t>(hooks.size()),
          "saved " + std::to_string(hook_count) + " hooks with state, this run has " +
              std::to_string(hooks.size()));
  for (size_t i = 0; i < hooks.size(); ++i) {
    torch::serialize::InputArchive hook_archive;
    archive.read("hook/" + std::to_string(i), hook_archive);
    hooks[i]->load(hook_archive);
  }

  torch::Tensor counters, generator_state;
  archive.read("counters", counters);
  archive.read("cpu_generator", generator_state);
  strategy.set_counters(counters_from_tensor(counters));
  set_cpu_generator_state(generator_state);
}

void save_training_checkpoint(const TrainingStrategy& strategy, const std::string& path) {
  const std::string bytes = save_training_state(strategy);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::FILE* file = std::fopen(temporary.c_str(), "wb");
    if (file == nullptr)
      throw std::runtime_error("cannot write training checkpoint '" + temporary + "'");
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
    // fsync before rename: the new name must never point at data still in flight.
    const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
    const bool closed = std::fclose(file) == 0;
    if (!written || !flushed || !closed) {
      std::remove(temporary.c_str());
      throw std::runtime_error("writing training checkpoint '" + temporary + "' failed");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot rename '" + temporary + "' to '" + path + "'");
  }
}

void load_training_checkpoint(TrainingStrategy& strategy, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error("cannot open training checkpoint '" + path + "'");
  std::string bytes;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) bytes.append(buffer, n);
  std::fclose(file);
  try {
    load_training_state(strategy, bytes);
  } catch (const std::exception& error) {
    throw std::runtime_error("training checkpoint '" + path + "': " + error.what());
  }
}

CheckpointHook::CheckpointHook(std::string directory, int64_t step_interval, bool rank_zero_only)
    : Hook(TrainingStage::AfterBatch),
      directory_(std::move(directory)),
      step_interval_(step_interval),
      rank_zero_only_(rank_zero_only) {
  if (step_interval_ <= 0)
    throw std::invalid_argument("CheckpointHook: step_interval must be > 0, got " +
                                std::to_string(step_interval_));
}

void CheckpointHook::operator()(TrainContext& ctx, TrainingStage /*stage*/) {
  const int64_t step = ctx.counters.step_count;
  if (step == 0 || step == last_saved_step_ || step % step_interval_ != 0) return;
  if (rank_zero_only_ && ctx.global_rank != 0) return;
  if (ctx.workflow == nullptr) throw std::logic_error("CheckpointHook needs the strategy");
  std::filesystem::create_directories(directory_);
  const std::string path =
      (std::filesystem::path(directory_) / ("checkpoint-" + std::to_string(step) + ".pt")).string();
  save_training_checkpoint(*ctx.workflow, path);
  save_training_checkpoint(*ctx.workflow, (std::filesystem::path(directory_) / "latest.pt").string());
  last_saved_step_ = step;
  last_checkpoint_path_ = path;
}

}  // namespace otf

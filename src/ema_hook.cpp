#include "ema_hook.h"

#include <torch/types.h>

#include <cctype>
#include <charconv>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace otf {
namespace {

constexpr const char* kModelKeyKey = "model_key";
constexpr const char* kDecayKey = "decay";
constexpr const char* kUpdateEveryKey = "update_every";
constexpr const char* kStartStepKey = "start_step";
constexpr const char* kUseBuffersKey = "use_buffers";
constexpr const char* kNumUpdatesKey = "num_updates";
constexpr const char* kAveragedParametersKey = "averaged_parameters";
constexpr const char* kAveragedBuffersKey = "averaged_buffers";
constexpr const char* kNAveragedKey = "n_averaged";

std::string trimmed(const std::string& text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

// The shortest text that reads back as the same double ("0.9", "0.999"), so that a conflict
// message never shows two equal-looking numbers.
std::string shortest_decimal(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// Python's list repr, as the reference's KeyError shows the available keys: ['main', 'aux'].
std::string python_list(const std::vector<std::string>& names) {
  std::string text = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i > 0 ? ", '" : "'") + names[i] + "'";
  }
  return text + "]";
}

std::string shape_text(const torch::Tensor& tensor) {
  std::string text = "[";
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    text += (d > 0 ? ", " : "") + std::to_string(tensor.size(d));
  }
  return text + "]";
}

NamedTensors deep_copy(const NamedTensors& tensors) {
  NamedTensors copies;
  for (const auto& item : tensors) copies.insert(item.key(), item.value().detach().clone());
  return copies;
}

// The same names and shapes in both (order aside); otherwise std::invalid_argument saying where.
void check_same_layout(const NamedTensors& reference, const NamedTensors& candidate,
                       const std::string& what, const std::string& where) {
  for (const auto& item : reference) {
    const torch::Tensor* match = candidate.find(item.key());
    if (match == nullptr) {
      throw std::invalid_argument("EmaHook: " + where + " lacks " + what + " '" + item.key() + "'");
    }
    if (!match->sizes().equals(item.value().sizes())) {
      throw std::invalid_argument("EmaHook: " + what + " '" + item.key() + "' has shape " +
                                  shape_text(*match) + " in " + where + " but " +
                                  shape_text(item.value()) + " in the model");
    }
  }
  for (const auto& item : candidate) {
    if (reference.find(item.key()) == nullptr) {
      throw std::invalid_argument("EmaHook: " + where + " has " + what + " '" + item.key() +
                                  "', which the model does not have");
    }
  }
}

// The reference aligns the averaged copy with the source tensor's device and, for floating
// tensors, its dtype (a model moved or cast after the copy was built).
void align_with(NamedTensors& averaged, const NamedTensors& source) {
  for (auto& item : averaged) {
    const torch::Tensor& current = source[item.key()];
    torch::Tensor& average = item.value();
    const c10::ScalarType dtype =
        current.is_floating_point() ? current.scalar_type() : average.scalar_type();
    if (average.device() != current.device() || average.scalar_type() != dtype) {
      average = average.to(current.device(), dtype);
    }
  }
}

// copy_ converts dtype and device, so a checkpoint taken on another device loads as is.
void copy_values(NamedTensors& destination, const NamedTensors& source) {
  for (auto& item : destination) item.value().copy_(source[item.key()]);
}

// PyTorch's get_ema_multi_avg_fn(decay): torch._foreach_lerp_(averaged, current, 1 - decay) for
// floating tensors, averaged * decay + current * (1 - decay) copied back for the others (integer
// buffers such as a batch counter).
void average_into(NamedTensors& averaged, const NamedTensors& current, double decay) {
  for (auto& item : averaged) {
    torch::Tensor& average = item.value();
    const torch::Tensor& value = current[item.key()];
    if (average.is_floating_point() || average.is_complex()) {
      average.lerp_(value, 1.0 - decay);
    } else {
      average.copy_(average * decay + value * (1.0 - decay));
    }
  }
}

NamedTensors named_tensors_from(const c10::IValue& dict, const std::string& key) {
  if (!dict.isGenericDict()) {
    throw std::invalid_argument("EmaHook checkpoint: '" + key + "' is not a dict of tensors");
  }
  NamedTensors tensors;
  for (const auto& entry : dict.toGenericDict()) {
    tensors.insert(entry.key().toStringRef(), entry.value().toTensor());
  }
  return tensors;
}

c10::IValue dict_of(const NamedTensors& tensors) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& item : tensors) dict.insert(item.key(), item.value());
  return c10::IValue(std::move(dict));
}

}  // namespace

EmaHook::EmaHook(EmaOptions options) : TrainingUpdateHook(kPriority), options_(std::move(options)) {
  options_.model_key = trimmed(options_.model_key);
  check_options(options_);
}

void EmaHook::check_options(const EmaOptions& options) {
  if (trimmed(options.model_key).empty()) {
    throw std::invalid_argument(
        "EmaHook: model_key must name a model (e.g. \"main\"), got an "
        "empty string");
  }
  if (!(options.decay >= 0.0 && options.decay < 1.0)) {
    throw std::invalid_argument("EmaHook: decay must be in [0, 1), got " +
                                shortest_decimal(options.decay));
  }
  if (options.update_every <= 0) {
    throw std::invalid_argument("EmaHook: update_every must be > 0, got " +
                                std::to_string(options.update_every));
  }
  if (options.start_step < 0) {
    throw std::invalid_argument("EmaHook: start_step must be >= 0, got " +
                                std::to_string(options.start_step));
  }
}

const NamedTensors& EmaHook::averaged_parameters() const { return initialized_state().parameters; }

const NamedTensors& EmaHook::averaged_buffers() const { return initialized_state().buffers; }

void EmaHook::copy_averaged_to(torch::nn::Module& module) const {
  const AveragedState& state = initialized_state();
  NamedTensors parameters = module.named_parameters();
  NamedTensors buffers = module.named_buffers();
  check_same_layout(parameters, state.parameters, "parameter", "the averaged copy");
  check_same_layout(buffers, state.buffers, "buffer", "the averaged copy");
  torch::NoGradGuard no_grad;
  copy_values(parameters, state.parameters);
  copy_values(buffers, state.buffers);
}

UpdateResult EmaHook::call(TrainContext& ctx, TrainingStage stage, bool will_skip) {
  switch (stage) {
    case TrainingStage::Setup: {
      const torch::nn::Module& model = source_model(ctx);
      if (averaged_) {
        align_with_model(model);
      } else {
        initialize(model);
      }
      break;
    }
    case TrainingStage::AfterOptimizerStep: {
      // A skipped step changed no weight: nothing to average, and nothing to build either.
      if (will_skip || !due_after_step(ctx.counters.step_count)) break;
      const torch::nn::Module& model = source_model(ctx);
      if (!averaged_) initialize(model);
      update(model);
      ++num_updates_;
      break;
    }
    default:
      break;
  }
  return {true, ctx.loss};
}

bool EmaHook::due_after_step(int64_t step_count) const {
  // Counters are pre-increment at AFTER_OPTIMIZER_STEP: this step is number step_count + 1.
  const int64_t completed = step_count + 1;
  return completed >= options_.start_step && completed % options_.update_every == 0;
}

const torch::nn::Module& EmaHook::source_model(const TrainContext& ctx) const {
  std::vector<std::string> available;
  if (ctx.models != nullptr) {
    const auto found = ctx.models->find(options_.model_key);
    if (found != ctx.models->end() && found->second) return *found->second;
    for (const auto& entry : *ctx.models) available.push_back(entry.first);
  }
  throw std::out_of_range("EmaHook: no model '" + options_.model_key +
                          "' to average; available models: " + python_list(available) +
                          " (set EmaOptions::model_key to one of them)");
}

const EmaHook::AveragedState& EmaHook::initialized_state() const {
  if (!averaged_) {
    throw std::runtime_error("EmaHook has not initialized its averaged copy of model '" +
                             options_.model_key +
                             "' yet; it is built at SETUP or at the first update");
  }
  return *averaged_;
}

void EmaHook::initialize(const torch::nn::Module& model) {
  AveragedState state;
  state.parameters = deep_copy(model.named_parameters());
  state.buffers = deep_copy(model.named_buffers());
  if (pending_) {
    // A checkpoint loaded before the copy existed takes effect before any update.
    const std::string where = "the checkpoint of model '" + options_.model_key + "'";
    check_same_layout(state.parameters, pending_->parameters, "parameter", where);
    check_same_layout(state.buffers, pending_->buffers, "buffer", where);
    torch::NoGradGuard no_grad;
    copy_values(state.parameters, pending_->parameters);
    copy_values(state.buffers, pending_->buffers);
    state.n_averaged = pending_->n_averaged;
  }
  averaged_ = std::move(state);
  pending_.reset();
}

void EmaHook::align_with_model(const torch::nn::Module& model) {
  AveragedState& state = *averaged_;
  const NamedTensors parameters = model.named_parameters();
  const NamedTensors buffers = model.named_buffers();
  // A model swapped for another architecture after the copy was built must not be averaged name
  // by name.
  const std::string where = "the averaged copy of model '" + options_.model_key + "'";
  check_same_layout(parameters, state.parameters, "parameter", where);
  check_same_layout(buffers, state.buffers, "buffer", where);
  align_with(state.parameters, parameters);
  align_with(state.buffers, buffers);
}

void EmaHook::update(const torch::nn::Module& model) {
  align_with_model(model);
  AveragedState& state = *averaged_;
  const NamedTensors parameters = model.named_parameters();
  const NamedTensors buffers = model.named_buffers();

  torch::NoGradGuard no_grad;
  if (state.n_averaged == 0) {
    // AveragedModel.update_parameters: the first update copies, whatever the decay.
    copy_values(state.parameters, parameters);
    copy_values(state.buffers, buffers);
  } else {
    average_into(state.parameters, parameters, options_.decay);
    // AveragedModel with use_buffers=False keeps the buffers in sync with the model instead.
    if (options_.use_buffers) {
      average_into(state.buffers, buffers, options_.decay);
    } else {
      copy_values(state.buffers, buffers);
    }
  }
  ++state.n_averaged;
}

void EmaHook::save(torch::serialize::OutputArchive& archive) const {
  archive.write(kModelKeyKey, c10::IValue(options_.model_key));
  archive.write(kDecayKey, c10::IValue(options_.decay));
  archive.write(kUpdateEveryKey, c10::IValue(options_.update_every));
  archive.write(kStartStepKey, c10::IValue(options_.start_step));
  archive.write(kUseBuffersKey, c10::IValue(options_.use_buffers));
  archive.write(kNumUpdatesKey, c10::IValue(num_updates_));
  // Loaded but not applied yet: saved as loaded, so a save/load cycle before SETUP loses nothing.
  const AveragedState* state = averaged_ ? &*averaged_ : (pending_ ? &*pending_ : nullptr);
  if (state == nullptr) return;
  archive.write(kAveragedParametersKey, dict_of(state->parameters));
  archive.write(kAveragedBuffersKey, dict_of(state->buffers));
  archive.write(kNAveragedKey, c10::IValue(state->n_averaged));
}

void EmaHook::load(torch::serialize::InputArchive& archive) {
  // Every check before any change: a rejected checkpoint leaves the hook as it was.
  std::vector<std::string> conflicts;
  c10::IValue value;
  if (archive.try_read(kModelKeyKey, value) && value.toStringRef() != options_.model_key) {
    conflicts.push_back("model_key='" + value.toStringRef() + "' vs constructor model_key='" +
                        options_.model_key + "'");
  }
  if (archive.try_read(kDecayKey, value) && value.toDouble() != options_.decay) {
    conflicts.push_back("decay=" + shortest_decimal(value.toDouble()) +
                        " vs constructor decay=" + shortest_decimal(options_.decay));
  }
  if (archive.try_read(kUpdateEveryKey, value) && value.toInt() != options_.update_every) {
    conflicts.push_back("update_every=" + std::to_string(value.toInt()) +
                        " vs constructor update_every=" + std::to_string(options_.update_every));
  }
  if (archive.try_read(kStartStepKey, value) && value.toInt() != options_.start_step) {
    conflicts.push_back("start_step=" + std::to_string(value.toInt()) +
                        " vs constructor start_step=" + std::to_string(options_.start_step));
  }
  if (archive.try_read(kUseBuffersKey, value) && value.toBool() != options_.use_buffers) {
    conflicts.push_back(std::string("use_buffers=") + (value.toBool() ? "true" : "false") +
                        " vs constructor use_buffers=" + (options_.use_buffers ? "true" : "false"));
  }
  if (!conflicts.empty()) {
    std::string message = "EmaHook checkpoint conflict: ";
    for (std::size_t i = 0; i < conflicts.size(); ++i) {
      message += (i > 0 ? ", " : "") + conflicts[i];
    }
    throw std::invalid_argument(message +
                                "; construct the hook with matching config to load this "
                                "checkpoint.");
  }

  std::optional<int64_t> restored_num_updates;
  if (archive.try_read(kNumUpdatesKey, value)) restored_num_updates = value.toInt();

  std::optional<AveragedState> loaded;
  c10::IValue parameters;
  if (archive.try_read(kAveragedParametersKey, parameters)) {
    loaded.emplace();
    loaded->parameters = named_tensors_from(parameters, kAveragedParametersKey);
    c10::IValue buffers;
    if (archive.try_read(kAveragedBuffersKey, buffers)) {
      loaded->buffers = named_tensors_from(buffers, kAveragedBuffersKey);
    }
    loaded->n_averaged = archive.try_read(kNAveragedKey, value)
                             ? value.toInt()
                             : restored_num_updates.value_or(num_updates_);
    if (averaged_) {
      const std::string where = "the checkpoint of model '" + options_.model_key + "'";
      check_same_layout(averaged_->parameters, loaded->parameters, "parameter", where);
      check_same_layout(averaged_->buffers, loaded->buffers, "buffer", where);
    }
  }

  if (restored_num_updates) num_updates_ = *restored_num_updates;
  if (!loaded) {
    // The reference: a state without averaged weights clears them; the next SETUP rebuilds.
    averaged_.reset();
    pending_.reset();
  } else if (averaged_) {
    torch::NoGradGuard no_grad;
    copy_values(averaged_->parameters, loaded->parameters);
    copy_values(averaged_->buffers, loaded->buffers);
    averaged_->n_averaged = loaded->n_averaged;
  } else {
    pending_ = std::move(loaded);
  }
}

}  // namespace otf

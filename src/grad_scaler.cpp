#include "grad_scaler.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/core/List.h>
#include <torch/utils.h>

#include "keywords.h"

namespace otf {
namespace {

// Message texts are PyTorch's (torch/amp/grad_scaler.py, ATen AmpGradScalerKernels.cpp).
constexpr const char* kGrowthFactorMessage = "The growth factor must be > 1.0.";
constexpr const char* kBackoffFactorMessage = "The backoff factor must be < 1.0.";
constexpr const char* kFp16GradsMessage = "Attempting to unscale FP16 gradients.";
constexpr const char* kNotIterableMessage = "outputs must be a Tensor or an iterable of Tensors";
constexpr const char* kClosureMessage =
    "Closure use is not currently supported if GradScaler is enabled.";
constexpr const char* kNewScaleMessage =
    "new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor with "
    "requires_grad=False.";
constexpr const char* kEmptyStateMessage =
    "The source state dict is empty, possibly because it was saved from a disabled instance of "
    "GradScaler.";

// state_dict() keys of PyTorch's GradScaler, reused as archive keys.
constexpr const char* kScaleKey = "scale";
constexpr const char* kGrowthFactorKey = "growth_factor";
constexpr const char* kBackoffFactorKey = "backoff_factor";
constexpr const char* kGrowthIntervalKey = "growth_interval";
constexpr const char* kGrowthTrackerKey = "_growth_tracker";

bool is_reduced_precision(c10::ScalarType dtype) {
  return dtype == torch::kHalf || dtype == torch::kBFloat16;
}

void require(bool condition, const char* message) {
  if (!condition) {
    throw std::invalid_argument(message);
  }
}

// PyTorch's own checks of GradScaler.__init__, with its messages.
void check_pytorch_factors(const GradScalerOptions& options) {
  require(options.growth_factor > 1.0, kGrowthFactorMessage);
  require(options.backoff_factor < 1.0, kBackoffFactorMessage);
}

// One tensor of torch._amp_foreach_non_finite_check_and_unscale_. The kernel reads each element
// as its opmath type (float for fp16/bf16/fp32, double for fp64), flags non-finite values, and
// writes value * inv_scale rounded once to the tensor's dtype.
void unscale_and_check_finite(torch::Tensor values, const torch::Tensor& inv_scale,
                              torch::Tensor& found_inf) {
  const torch::Tensor inv_scale_here = inv_scale.to(values.device()).reshape({});
  const torch::Tensor has_non_finite = values.isfinite().all().logical_not();
  found_inf.masked_fill_(has_non_finite.to(found_inf.device()), 1.0);
  if (is_reduced_precision(values.scalar_type())) {
    values.copy_(values.to(torch::kFloat).mul_(inv_scale_here));
  } else {
    values.mul_(inv_scale_here);
  }
}

}  // namespace

void unscale_grads_and_check_finite(at::TensorList grads, const torch::Tensor& inv_scale,
                                    torch::Tensor& found_inf, bool allow_fp16) {
  // PyTorch collects and checks every grad before launching any kernel, so a rejected fp16 grad
  // leaves all grads untouched.
  if (!allow_fp16) {
    for (const torch::Tensor& grad : grads) {
      if (grad.defined() && grad.scalar_type() == torch::kHalf) {
        throw std::invalid_argument(kFp16GradsMessage);
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& grad : grads) {
    if (!grad.defined()) {
      continue;
    }
    unscale_and_check_finite(grad.is_sparse() ? grad._values() : grad, inv_scale, found_inf);
  }
}

bool unscale_optimizer_grads_and_check_finite(torch::optim::Optimizer& optimizer,
                                              const torch::Tensor& inv_scale,
                                              torch::Tensor& found_inf, bool allow_fp16) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      if (!param.grad().defined()) {
        continue;
      }
      if (!allow_fp16 && param.grad().scalar_type() == torch::kHalf) {
        throw std::invalid_argument(kFp16GradsMessage);
      }
      // Matches GradScaler._unscale_grads_: "coalesce() deduplicates indices and adds all values
      // that have the same index. For scaled fp16 values, there's a good chance coalescing will
      // cause overflow, so we should check the coalesced _values()."
      if (param.grad().is_sparse() && param.grad().scalar_type() == torch::kHalf) {
        param.mutable_grad() = param.grad().coalesce();
      }
      grads.push_back(param.grad());
    }
  }
  unscale_grads_and_check_finite(grads, inv_scale, found_inf, allow_fp16);
  return !grads.empty();
}

void update_scale_and_growth_tracker(torch::Tensor& scale, torch::Tensor& growth_tracker,
                                     const torch::Tensor& found_inf, double growth_factor,
                                     double backoff_factor, int64_t growth_interval) {
  require(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  require(scale.numel() == 1, "current_scale must be a 1-element tensor.");
  require(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  require(growth_tracker.scalar_type() == torch::kInt, "growth_tracker must be an int tensor.");
  require(scale.scalar_type() == torch::kFloat, "current_scale must be a float tensor.");
  require(found_inf.scalar_type() == torch::kFloat, "found_inf must be a float tensor.");

  // Matches _amp_update_scale_cpu_ (ATen/native/cpu/AmpGradScalerKernels.cpp) and the CUDA kernel.
  const float current_scale = scale.item<float>();
  const int32_t current_tracker = growth_tracker.item<int32_t>();
  if (found_inf.item<float>() != 0.0f) {
    scale.fill_(static_cast<float>(current_scale * backoff_factor));
    growth_tracker.fill_(0);
    return;
  }
  // int64 so that a tracker at INT32_MAX cannot overflow (the kernel's int would).
  const int64_t successful_steps = static_cast<int64_t>(current_tracker) + 1;
  if (successful_steps == growth_interval) {
    const auto grown_scale = static_cast<float>(current_scale * growth_factor);
    // "Do not grow the scale past fp32 bounds to inf."
    if (std::isfinite(grown_scale)) {
      scale.fill_(grown_scale);
    }
    growth_tracker.fill_(0);
  } else {
    growth_tracker.fill_(successful_steps);
  }
}

GradScaler::GradScaler(GradScalerOptions options)
    : init_scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval),
      enabled_(options.enabled) {
  // PyTorch validates only enabled scalers, so a disabled one accepts any factors.
  if (enabled_) check_pytorch_factors(options);
}

void check_grad_scaler_options(const GradScalerOptions& options) {
  if (!options.enabled) return;
  check_pytorch_factors(options);
  if (!(std::isfinite(options.init_scale) && options.init_scale > 0.0))
    throw std::invalid_argument("GradScaler: init_scale must be finite and > 0, got " +
                                format_number(options.init_scale));
  if (!(options.backoff_factor > 0.0))
    throw std::invalid_argument("GradScaler: backoff_factor must be in (0, 1), got " +
                                format_number(options.backoff_factor));
  if (options.growth_interval < 1)
    throw std::invalid_argument("GradScaler: growth_interval must be >= 1, got " +
                                std::to_string(options.growth_interval));
}

void GradScaler::lazy_init_scale_and_growth_tracker(const c10::Device& device) {
  scale_ = torch::full({}, init_scale_, torch::TensorOptions().dtype(torch::kFloat).device(device));
  growth_tracker_ = torch::full({}, init_growth_tracker_,
                                torch::TensorOptions().dtype(torch::kInt).device(device));
}

void GradScaler::check_initialized(const char* function_name) const {
  if (!scale_.defined() || !growth_tracker_.defined()) {
    throw std::runtime_error(std::string("Attempted ") + function_name +
                             " but _scale is None.  This may indicate your script did not use "
                             "scaler.scale(loss or outputs) earlier in the iteration.");
  }
}

torch::Tensor GradScaler::scale_single(const torch::Tensor& output) {
  if (!output.defined()) {
    throw std::invalid_argument(kNotIterableMessage);
  }
  if (!scale_.defined()) {
    lazy_init_scale_and_growth_tracker(output.device());
  }
  return output * scale_.to(output.device());
}

torch::Tensor GradScaler::scale(const torch::Tensor& outputs) {
  if (!enabled_) {
    return outputs;
  }
  return scale_single(outputs);
}

c10::IValue GradScaler::scale(const c10::IValue& outputs) {
  if (!enabled_) {
    return outputs;
  }
  return scale_nested(outputs);
}

c10::IValue GradScaler::scale_nested(const c10::IValue& outputs) {
  if (outputs.isTensor()) {
    return scale_single(outputs.toTensor());
  }
  // Every list kind (tensor lists included) is a GenericList with an element type in 1.13;
  // keeping that type returns a TensorList for a TensorList.
  if (outputs.isList()) {
    const c10::impl::GenericList inputs = outputs.toList();
    c10::impl::GenericList scaled(inputs.elementType());
    scaled.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      scaled.push_back(scale_nested(inputs.get(i)));
    }
    return scaled;
  }
  if (outputs.isTuple()) {
    std::vector<c10::IValue> scaled;
    scaled.reserve(outputs.toTupleRef().elements().size());
    for (const c10::IValue& element : outputs.toTupleRef().elements()) {
      scaled.push_back(scale_nested(element));
    }
    return c10::ivalue::Tuple::create(std::move(scaled));
  }
  throw std::invalid_argument(kNotIterableMessage);
}

GradScaler::PerOptimizerState& GradScaler::state_of(const torch::optim::Optimizer& optimizer) {
  return per_optimizer_states_[&optimizer];
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!enabled_) {
    return;
  }
  check_initialized("unscale_");
  PerOptimizerState& state = state_of(optimizer);
  if (state.stage == OptimizerStage::kUnscaled) {
    throw std::runtime_error(
        "unscale_() has already been called on this optimizer since the last update().");
  }
  if (state.stage == OptimizerStage::kStepped) {
    throw std::runtime_error("unscale_() is being called after step().");
  }

  // Matches GradScaler.unscale_: the reciprocal is taken in fp64 and rounded to fp32.
  const torch::Tensor inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  torch::Tensor found_inf = torch::zeros({}, scale_.options());
  const bool any_grad_checked =
      unscale_optimizer_grads_and_check_finite(optimizer, inv_scale, found_inf, false);
  if (found_inf_reducer_) {
    found_inf_reducer_(found_inf);
  }
  state.found_inf = any_grad_checked ? found_inf : torch::Tensor();
  state.stage = OptimizerStage::kUnscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check_initialized("step");
  PerOptimizerState& state = state_of(optimizer);
  if (state.stage == OptimizerStage::kStepped) {
    throw std::runtime_error("step() has already been called since the last update().");
  }
  if (state.stage == OptimizerStage::kReady) {
    unscale_(optimizer);
  }
  if (!state.found_inf.defined()) {
    throw std::runtime_error("No inf checks were recorded for this optimizer.");
  }
  // Matches GradScaler._maybe_opt_step: step only if the found_inf sum is 0 (a NaN sum skips).
  const bool all_finite = state.found_inf.item<float>() == 0.0f;
  if (all_finite) {
    optimizer.step();
  }
  state.stage = OptimizerStage::kStepped;
  return all_finite;
}

torch::Tensor GradScaler::step(torch::optim::Optimizer& optimizer,
                               const torch::optim::Optimizer::LossClosure& closure) {
  if (!enabled_) {
    return optimizer.step(closure);
  }
  throw std::runtime_error(kClosureMessage);
}

void GradScaler::update() {
  if (!enabled_) {
    return;
  }
  check_initialized("update");
  torch::Tensor found_inf_sum;
  for (const auto& entry : per_optimizer_states_) {
    const torch::Tensor& found_inf = entry.second.found_inf;
    if (!found_inf.defined()) {
      continue;
    }
    const torch::Tensor found_inf_here = found_inf.to(scale_.device());
    found_inf_sum = found_inf_sum.defined() ? found_inf_sum + found_inf_here : found_inf_here;
  }
  if (!found_inf_sum.defined()) {
    throw std::runtime_error("No inf checks were recorded prior to update.");
  }
  update_scale_and_growth_tracker(scale_, growth_tracker_, found_inf_sum, growth_factor_,
                                  backoff_factor_, growth_interval_);
  per_optimizer_states_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) {
    return;
  }
  check_initialized("update");
  scale_.fill_(new_scale);
  per_optimizer_states_.clear();
}

void GradScaler::update(const torch::Tensor& new_scale) {
  if (!enabled_) {
    return;
  }
  check_initialized("update");
  require(new_scale.defined() && new_scale.scalar_type() == torch::kFloat &&
              new_scale.device().type() == scale_.device().type() && new_scale.numel() == 1 &&
              !new_scale.requires_grad(),
          kNewScaleMessage);
  {
    torch::NoGradGuard no_grad;
    scale_.copy_(new_scale.reshape({}));
  }
  per_optimizer_states_.clear();
}

void GradScaler::set_found_inf_reducer(FoundInfReducer reducer) {
  found_inf_reducer_ = std::move(reducer);
}

double GradScaler::get_scale() const {
  if (!enabled_) {
    return 1.0;
  }
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : init_scale_;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!enabled_) {
    return 0;
  }
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : init_growth_tracker_;
}

double GradScaler::get_growth_factor() const { return growth_factor_; }

void GradScaler::set_growth_factor(double growth_factor) { growth_factor_ = growth_factor; }

double GradScaler::get_backoff_factor() const { return backoff_factor_; }

void GradScaler::set_backoff_factor(double backoff_factor) { backoff_factor_ = backoff_factor; }

int64_t GradScaler::get_growth_interval() const { return growth_interval_; }

void GradScaler::set_growth_interval(int64_t growth_interval) {
  growth_interval_ = growth_interval;
}

bool GradScaler::is_enabled() const { return enabled_; }

const torch::Tensor& GradScaler::scale_tensor() const { return scale_; }

const torch::Tensor& GradScaler::growth_tracker_tensor() const { return growth_tracker_; }

std::optional<GradScalerState> GradScaler::state_dict() const {
  if (!enabled_) {
    return std::nullopt;
  }
  return GradScalerState{get_scale(), growth_factor_, backoff_factor_, growth_interval_,
                         get_growth_tracker()};
}

void GradScaler::load_state_dict(const std::optional<GradScalerState>& state) {
  if (!enabled_) {
    return;
  }
  if (!state) {
    throw std::runtime_error(kEmptyStateMessage);
  }
  // Matches GradScaler.load_state_dict: the loaded values also become the initial ones, so a
  // scaler that was not initialised yet starts from them on its first scale().
  init_scale_ = state->scale;
  growth_factor_ = state->growth_factor;
  backoff_factor_ = state->backoff_factor;
  growth_interval_ = state->growth_interval;
  init_growth_tracker_ = state->growth_tracker;
  if (scale_.defined()) {
    scale_.fill_(state->scale);
  }
  if (growth_tracker_.defined()) {
    growth_tracker_.fill_(state->growth_tracker);
  }
}

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  const std::optional<GradScalerState> state = state_dict();
  if (!state) {
    return;
  }
  archive.write(kScaleKey, c10::IValue(state->scale));
  archive.write(kGrowthFactorKey, c10::IValue(state->growth_factor));
  archive.write(kBackoffFactorKey, c10::IValue(state->backoff_factor));
  archive.write(kGrowthIntervalKey, c10::IValue(state->growth_interval));
  archive.write(kGrowthTrackerKey, c10::IValue(state->growth_tracker));
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
  if (!enabled_) {
    return;
  }
  c10::IValue scale;
  if (!archive.try_read(kScaleKey, scale)) {
    load_state_dict(std::nullopt);
    return;
  }
  const auto read = [&archive](const char* key) {
    c10::IValue value;
    if (!archive.try_read(key, value)) {
      throw std::runtime_error(std::string("GradScaler checkpoint has \"scale\" but no \"") + key +
                               "\"; it was not written by GradScaler::save.");
    }
    return value;
  };
  GradScalerState state;
  state.scale = scale.toDouble();
  state.growth_factor = read(kGrowthFactorKey).toDouble();
  state.backoff_factor = read(kBackoffFactorKey).toDouble();
  state.growth_interval = read(kGrowthIntervalKey).toInt();
  state.growth_tracker = read(kGrowthTrackerKey).toInt();
  load_state_dict(state);
}

}  // namespace otf

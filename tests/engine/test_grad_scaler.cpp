// Tests of otf::GradScaler against PyTorch's own GradScaler tests (test_cuda.py / test_torch.py
// grad-scaling tests, _run_scaling_case of common_cuda.py), cases G1-G29 of docs/design.md §7.3.
// Case labels are given in the comment above each test.
#include "grad_scaler.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "torch_compat.h"

namespace {

using otf::GradScaler;
using otf::GradScalerOptions;
using otf::GradScalerState;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::string kNotInitializedTail =
    " but _scale is None.  This may indicate your script did not use scaler.scale(loss or "
    "outputs) earlier in the iteration.";

// Checks the exception type and that what() is exactly PyTorch's message.
template <typename Exception, typename Callable>
void expect_error(Callable&& callable, const std::string& message) {
  try {
    callable();
  } catch (const Exception& error) {
    EXPECT_EQ(std::string(error.what()), message);
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE() << "wrong exception type; what(): " << other.what();
    return;
  }
  ADD_FAILURE() << "no exception; expected: " << message;
}

GradScalerOptions scaler_options(double init_scale, double growth_factor, double backoff_factor,
                                 int64_t growth_interval, bool enabled = true) {
  GradScalerOptions options;
  options.init_scale = init_scale;
  options.growth_factor = growth_factor;
  options.backoff_factor = backoff_factor;
  options.growth_interval = growth_interval;
  options.enabled = enabled;
  return options;
}

torch::Tensor full_float(std::vector<int64_t> sizes, double value,
                         c10::ScalarType dtype = torch::kFloat) {
  return torch::full(sizes, value, torch::TensorOptions().dtype(dtype));
}

bool bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    // equal() is false for NaN; compare the bytes so that NaN-free and NaN states both work.
    if (a[i].sizes() != b[i].sizes() || a[i].scalar_type() != b[i].scalar_type() ||
        !torch::equal(a[i].contiguous().view(torch::kByte), b[i].contiguous().view(torch::kByte))) {
      return false;
    }
  }
  return true;
}

std::vector<torch::Tensor> clone_all(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> clones;
  for (const torch::Tensor& tensor : tensors) {
    clones.push_back(tensor.detach().clone());
  }
  return clones;
}

double max_abs_difference(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  double largest = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, (a[i] - b[i]).abs().max().item<double>());
  }
  return largest;
}

// Mirrors PyTorch's assertEqual(c, s, atol=..., rtol=...) over all parameters.
void expect_all_close(const std::vector<torch::Tensor>& control,
                      const std::vector<torch::Tensor>& scaling, double rtol, double atol) {
  ASSERT_EQ(control.size(), scaling.size());
  for (size_t i = 0; i < control.size(); ++i) {
    EXPECT_TRUE(torch::allclose(scaling[i], control[i], rtol, atol))
        << "parameter " << i << " differs by up to "
        << (scaling[i] - control[i]).abs().max().item<double>();
  }
}

// A parameter with a grad from a scaled loss: loss = sum(parameter * weight).
struct TinyProblem {
  torch::Tensor parameter = torch::ones({3}, torch::requires_grad());
  torch::optim::SGD optimizer{std::vector<torch::Tensor>{parameter}, torch::optim::SGDOptions(1.0)};

  void backward_scaled(GradScaler& scaler, double weight = 1e-3) {
    optimizer.zero_grad();
    scaler.scale((parameter * weight).sum()).backward();
  }
  void poison_grad(double value) { parameter.mutable_grad().fill_(value); }
};

// One scaled iteration of TinyProblem; inject_inf writes inf into the grad before step().
bool run_tiny_iteration(GradScaler& scaler, TinyProblem& problem, bool inject_inf) {
  problem.backward_scaled(scaler);
  if (inject_inf) {
    problem.poison_grad(kInf);
  }
  const bool stepped = scaler.step(problem.optimizer);
  scaler.update();
  return stepped;
}

// Enter/exit of Python's torch.autocast("cpu", dtype=torch.bfloat16), scoped.
class CpuBf16AutocastRegion {
 public:
  CpuBf16AutocastRegion()
      : previous_enabled_(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU)),
        previous_dtype_(otf::torch_compat::autocast_dtype(c10::DeviceType::CPU)),
        previous_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
    otf::torch_compat::set_autocast_enabled(c10::DeviceType::CPU, true);
    otf::torch_compat::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
    at::autocast::increment_nesting();
    at::autocast::set_autocast_cache_enabled(true);
  }
  ~CpuBf16AutocastRegion() {
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    otf::torch_compat::set_autocast_enabled(c10::DeviceType::CPU, previous_enabled_);
    otf::torch_compat::set_autocast_dtype(c10::DeviceType::CPU, previous_dtype_);
    at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
  }
  CpuBf16AutocastRegion(const CpuBf16AutocastRegion&) = delete;
  CpuBf16AutocastRegion& operator=(const CpuBf16AutocastRegion&) = delete;

 private:
  bool previous_enabled_;
  at::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

// ---------------------------------------------------------------------------------------------
// PyTorch's _create_scaling_case / _run_scaling_case: a control model trained without scaling
// (skipping the step of the iteration where the scaled run sees an inf) against a scaled model.

constexpr size_t kSkipIteration = 2;

struct Batch {
  torch::Tensor input;
  torch::Tensor target;
};

torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Linear(8, 8), torch::nn::Linear(8, 8));
}

// A model with the same parameter values as source.
torch::nn::Sequential make_copy(const torch::nn::Sequential& source) {
  torch::nn::Sequential copy = make_model();
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> from = source->parameters();
  std::vector<torch::Tensor> to = copy->parameters();
  for (size_t i = 0; i < from.size(); ++i) {
    to[i].copy_(from[i]);
  }
  return copy;
}

torch::Tensor second_layer_weight(const torch::nn::Sequential& model) {
  return model->named_parameters()["1.weight"];
}

std::vector<Batch> make_batches() {
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) {
    torch::Tensor input = torch::randn({8, 8});
    torch::Tensor target = torch::randn({8, 8});
    batches.push_back({input, target});
  }
  return batches;
}

// What a run reports besides the final parameters.
struct RunLog {
  std::vector<double> scales_after_update;
  std::vector<bool> stepped;
  std::vector<std::vector<torch::Tensor>> grads_after_step;
};

using ScalingRun = std::function<void(
    const std::vector<Batch>& batches, torch::nn::Sequential& model,
    torch::optim::Optimizer& optimizer, GradScaler& scaler, bool use_scaler, RunLog& log)>;

struct ScalingCaseResult {
  RunLog control_log;
  RunLog scaling_log;
  std::vector<torch::Tensor> control_parameters;
  std::vector<torch::Tensor> scaling_parameters;
  double final_scale = 0.0;
};

// init 128, growth 2, interval 1: every unskipped step doubles the scale, so growth errors show.
ScalingCaseResult run_scaling_case(const ScalingRun& run, bool enabled) {
  torch::manual_seed(0);
  torch::nn::Sequential control_model = make_model();
  torch::nn::Sequential scaling_model = make_copy(control_model);
  torch::optim::SGD control_optimizer(control_model->parameters(), torch::optim::SGDOptions(1.0));
  torch::optim::SGD scaling_optimizer(scaling_model->parameters(), torch::optim::SGDOptions(1.0));
  const std::vector<Batch> batches = make_batches();
  GradScaler scaler(scaler_options(128.0, 2.0, 0.5, 1, enabled));

  ScalingCaseResult result;
  run(batches, control_model, control_optimizer, scaler, false, result.control_log);
  run(batches, scaling_model, scaling_optimizer, scaler, true, result.scaling_log);
  result.control_parameters = clone_all(control_model->parameters());
  result.scaling_parameters = clone_all(scaling_model->parameters());
  result.final_scale = scaler.get_scale();
  return result;
}

// The control skips the step where the scaled run injects inf, but only when scaling is enabled.
bool control_steps_at(const GradScaler& scaler, size_t iteration) {
  return !scaler.is_enabled() || iteration != kSkipIteration;
}

void record_grads(const torch::nn::Sequential& model, RunLog& log) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& parameter : model->parameters()) {
    grads.push_back(parameter.grad().clone());
  }
  log.grads_after_step.push_back(grads);
}

void scaled_step_and_update(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                            GradScaler& scaler, size_t iteration, RunLog& log,
                            bool inject_inf_here = true) {
  if (inject_inf_here && iteration == kSkipIteration && scaler.is_enabled()) {
    second_layer_weight(model).mutable_grad().fill_(kInf);
  }
  log.stepped.push_back(scaler.step(optimizer));
  scaler.update();
  log.scales_after_update.push_back(scaler.get_scale());
}

void control_step(torch::optim::Optimizer& optimizer, const GradScaler& scaler, size_t iteration,
                  RunLog& log) {
  const bool steps = control_steps_at(scaler, iteration);
  if (steps) {
    optimizer.step();
  }
  log.stepped.push_back(steps);
}

void run_plain(const std::vector<Batch>& batches, torch::nn::Sequential& model,
               torch::optim::Optimizer& optimizer, GradScaler& scaler, bool use_scaler,
               RunLog& log) {
  for (size_t i = 0; i < batches.size(); ++i) {
    optimizer.zero_grad();
    const torch::Tensor loss = torch::mse_loss(model->forward(batches[i].input), batches[i].target);
    if (use_scaler) {
      scaler.scale(loss).backward();
      scaled_step_and_update(model, optimizer, scaler, i, log);
    } else {
      loss.backward();
      control_step(optimizer, scaler, i, log);
    }
    record_grads(model, log);
  }
}

// ---------------------------------------------------------------------------------------------
// G1, G2: construction.

// G1
TEST(GradScaler, DefaultsMatchPyTorch) {
  const GradScaler scaler;
  EXPECT_TRUE(scaler.is_enabled());
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.5);
  EXPECT_EQ(scaler.get_growth_interval(), 2000);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  EXPECT_FALSE(scaler.scale_tensor().defined());
  EXPECT_FALSE(scaler.growth_tracker_tensor().defined());
}

// G2
TEST(GradScaler, RejectsNonGrowingFactorsOnlyWhenEnabled) {
  expect_error<std::invalid_argument>(
      [] { const GradScaler scaler(scaler_options(65536.0, 1.0, 0.5, 2000)); },
      "The growth factor must be > 1.0.");
  expect_error<std::invalid_argument>(
      [] { const GradScaler scaler(scaler_options(65536.0, 2.0, 1.0, 2000)); },
      "The backoff factor must be < 1.0.");
  EXPECT_NO_THROW({ const GradScaler scaler(scaler_options(65536.0, 1.0, 1.0, 2000, false)); });
}

TEST(GradScaler, SettersChangeFactorsWithoutValidation) {
  GradScaler scaler;
  scaler.set_growth_factor(0.5);
  scaler.set_backoff_factor(3.0);
  scaler.set_growth_interval(7);
  EXPECT_EQ(scaler.get_growth_factor(), 0.5);
  EXPECT_EQ(scaler.get_backoff_factor(), 3.0);
  EXPECT_EQ(scaler.get_growth_interval(), 7);
}

// ---------------------------------------------------------------------------------------------
// G3, G4: scale().

// G3
TEST(GradScaler, ScalesNestedTuplesAndListsPreservingStructure) {
  GradScaler scaler(scaler_options(2.0, 2.0, 0.5, 2000));
  const auto four = [] { return full_float({1}, 4.0); };
  c10::impl::GenericList inner_list(c10::AnyType::get());
  inner_list.push_back(four());
  inner_list.push_back(c10::ivalue::Tuple::create(four(), four()));
  const c10::IValue outputs = c10::ivalue::Tuple::create(
      four(), c10::ivalue::Tuple::create(four(), four()), std::move(inner_list));

  const c10::IValue scaled = scaler.scale(outputs);

  ASSERT_TRUE(scaled.isTuple());
  const auto& top = scaled.toTupleRef().elements();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].toTensor().item<float>(), 8.0f);
  ASSERT_TRUE(top[1].isTuple());
  EXPECT_EQ(top[1].toTupleRef().elements()[0].toTensor().item<float>(), 8.0f);
  EXPECT_EQ(top[1].toTupleRef().elements()[1].toTensor().item<float>(), 8.0f);
  ASSERT_TRUE(top[2].isList());
  const c10::impl::GenericList list = top[2].toList();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list.get(0).toTensor().item<float>(), 8.0f);
  ASSERT_TRUE(list.get(1).isTuple());
  EXPECT_EQ(list.get(1).toTupleRef().elements()[0].toTensor().item<float>(), 8.0f);
  EXPECT_EQ(list.get(1).toTupleRef().elements()[1].toTensor().item<float>(), 8.0f);
  // Inputs are left alone: scaling is out of place.
  EXPECT_EQ(outputs.toTupleRef().elements()[0].toTensor().item<float>(), 4.0f);

  const torch::Tensor& scale = scaler.scale_tensor();
  EXPECT_EQ(scale.device(), torch::Device(torch::kCPU));
  EXPECT_EQ(scale.scalar_type(), torch::kFloat);
  EXPECT_EQ(scale.dim(), 0);
  const torch::Tensor& tracker = scaler.growth_tracker_tensor();
  EXPECT_EQ(tracker.scalar_type(), torch::kInt);
  EXPECT_EQ(tracker.dim(), 0);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
}

TEST(GradScaler, ScalingATensorListReturnsATensorList) {
  GradScaler scaler(scaler_options(2.0, 2.0, 0.5, 2000));
  const c10::IValue scaled =
      scaler.scale(std::vector<torch::Tensor>{full_float({2}, 4.0), full_float({3}, 1.5)});
  ASSERT_TRUE(scaled.isTensorList());
  const c10::List<torch::Tensor> tensors = scaled.toTensorList();
  EXPECT_TRUE(torch::equal(tensors.get(0), full_float({2}, 8.0)));
  EXPECT_TRUE(torch::equal(tensors.get(1), full_float({3}, 3.0)));
}

TEST(GradScaler, ScalingAnythingButTensorsThrowsValueErrorText) {
  GradScaler scaler;
  const std::string message = "outputs must be a Tensor or an iterable of Tensors";
  expect_error<std::invalid_argument>([&] { scaler.scale(c10::IValue(3.0)); }, message);
  expect_error<std::invalid_argument>([&] { scaler.scale(c10::IValue(std::string("loss"))); },
                                      message);
  expect_error<std::invalid_argument>(
      [&] {
        scaler.scale(c10::IValue(std::vector<int64_t>{1, 2}));
      },
      message);
  expect_error<std::invalid_argument>(
      [&] { scaler.scale(c10::ivalue::Tuple::create(full_float({1}, 1.0), c10::IValue())); },
      message);
  expect_error<std::invalid_argument>([&] { scaler.scale(torch::Tensor()); }, message);
}

TEST(GradScaler, ScaleInitializesLazilyOnFirstCall) {
  GradScaler scaler(scaler_options(4.0, 2.0, 0.5, 2000));
  EXPECT_FALSE(scaler.scale_tensor().defined());
  const torch::Tensor loss = full_float({}, 3.0);
  const torch::Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.item<float>(), 12.0f);
  EXPECT_TRUE(scaler.scale_tensor().defined());
}

// A 0-dim bf16 loss times the 0-dim fp32 scale gives fp32; larger bf16 tensors stay bf16
// (docs/design.md §7.3).
TEST(GradScaler, ScaledDtypeFollowsTypePromotion) {
  GradScaler scaler;
  EXPECT_EQ(scaler.scale(full_float({}, 1.0, torch::kBFloat16)).scalar_type(), torch::kFloat);
  EXPECT_EQ(scaler.scale(full_float({4}, 1.0, torch::kBFloat16)).scalar_type(), torch::kBFloat16);
}

TEST(GradScaler, ScaledLossIsDifferentiable) {
  GradScaler scaler(scaler_options(8.0, 2.0, 0.5, 2000));
  const torch::Tensor x = torch::full({2}, 3.0, torch::requires_grad());
  scaler.scale((x * x).sum()).backward();
  EXPECT_TRUE(torch::equal(x.grad(), full_float({2}, 48.0)));
}

// G4
TEST(GradScaler, DisabledScalerIsTransparent) {
  GradScaler scaler(scaler_options(128.0, 2.0, 0.5, 1, false));
  EXPECT_FALSE(scaler.is_enabled());
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);

  // Nothing initialised yet, and still no call-order errors.
  TinyProblem problem;
  EXPECT_NO_THROW(scaler.unscale_(problem.optimizer));
  EXPECT_NO_THROW(scaler.update());

  const torch::Tensor loss = (problem.parameter * 2.0).sum();
  const torch::Tensor scaled = scaler.scale(loss);
  EXPECT_TRUE(scaled.is_same(loss));
  const c10::IValue list = c10::IValue(std::vector<torch::Tensor>{loss});
  EXPECT_TRUE(scaler.scale(list).isSameIdentity(list));
  scaled.backward();
  scaler.unscale_(problem.optimizer);
  EXPECT_TRUE(torch::equal(problem.parameter.grad(), full_float({3}, 2.0)));  // not unscaled
  EXPECT_TRUE(scaler.step(problem.optimizer));
  EXPECT_TRUE(torch::equal(problem.parameter.detach(), full_float({3}, -1.0)));  // 1 - lr * 2
  EXPECT_NO_THROW(scaler.step(problem.optimizer));  // no STEPPED state either
  scaler.update();
  scaler.update(5.0);
  EXPECT_EQ(scaler.get_scale(), 1.0);

  EXPECT_FALSE(scaler.state_dict().has_value());
  EXPECT_NO_THROW(scaler.load_state_dict(std::nullopt));
  scaler.load_state_dict(GradScalerState{3.0, 4.0, 0.25, 5, 6});
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);
  EXPECT_EQ(scaler.get_growth_interval(), 1);
  EXPECT_FALSE(scaler.scale_tensor().defined());
}

// ---------------------------------------------------------------------------------------------
// G5-G8: the kernels.

torch::Tensor filled_grad(double value = 4.0) { return full_float({20, 20}, value); }

torch::Tensor with_value_at_2_2(torch::Tensor tensor, double value) {
  tensor.index_put_({2, 2}, value);
  return tensor;
}

void expect_all_ones(const std::vector<torch::Tensor>& grads) {
  for (const torch::Tensor& grad : grads) {
    EXPECT_TRUE(
        torch::allclose(grad.to(torch::kFloat), torch::ones_like(grad, torch::kFloat), 1e-5, 1e-7));
  }
}

// G5: the same layouts as test_grad_scaling_unscale (contiguous, transposed, column slices).
TEST(UnscaleKernel, UnscalesContiguousTransposedAndSlicedGrads) {
  using torch::indexing::Slice;
  const torch::Tensor inv_scale = full_float({1}, 0.25);
  const std::vector<std::vector<torch::Tensor>> cases = {
      {filled_grad(), filled_grad()},
      {filled_grad(), filled_grad().t()},
      {filled_grad(), filled_grad().index({Slice(), Slice(0, 5)})},
      {filled_grad().index({Slice(), Slice(0, 5)}), filled_grad().index({Slice(), Slice(0, 5)})},
  };
  for (const std::vector<torch::Tensor>& grads : cases) {
    torch::Tensor found_inf = full_float({1}, 0.0);
    otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, false);
    EXPECT_EQ(found_inf.item<float>(), 0.0f);
    expect_all_ones(grads);
  }
}

// G6
TEST(UnscaleKernel, FindsInfOrNaNInAnyGradAndLayout) {
  using torch::indexing::Slice;
  const torch::Tensor inv_scale = full_float({1}, 0.25);
  for (const double poison : {kInf, kNaN}) {
    const auto bad = [poison] { return with_value_at_2_2(filled_grad(), poison); };
    const std::vector<std::vector<torch::Tensor>> cases = {
        {filled_grad(), bad()},
        {filled_grad(), bad().index({Slice(), Slice(0, 5)})},
        {bad(), filled_grad().index({Slice(), Slice(0, 5)})},
        {bad().index({Slice(), Slice(0, 5)}), filled_grad().index({Slice(), Slice(0, 5)})},
        {bad().t(), filled_grad()},
    };
    for (const std::vector<torch::Tensor>& grads : cases) {
      torch::Tensor found_inf = full_float({1}, 0.0);
      otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, false);
      EXPECT_EQ(found_inf.item<float>(), 1.0f) << "poison " << poison;
      // Unscaled even though a non-finite value was found (docs/design.md §7.3).
      EXPECT_EQ(grads[0].index({0, 0}).item<float>(), 1.0f);
      EXPECT_EQ(grads[1].index({0, 0}).item<float>(), 1.0f);
    }
  }
}

TEST(UnscaleKernel, FoundInfIsOnlyEverSet) {
  const torch::Tensor inv_scale = full_float({}, 0.5);
  torch::Tensor found_inf = full_float({}, 1.0);
  std::vector<torch::Tensor> grads = {filled_grad()};
  otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, false);
  EXPECT_EQ(found_inf.item<float>(), 1.0f);
  EXPECT_TRUE(torch::equal(grads[0], filled_grad(2.0)));
}

TEST(UnscaleKernel, MixedDtypesAreUnscaledWhenFp16Allowed) {
  const torch::Tensor inv_scale = full_float({1}, 0.25);
  torch::Tensor found_inf = full_float({1}, 0.0);
  const std::vector<torch::Tensor> grads = {filled_grad(), filled_grad().to(torch::kHalf),
                                            filled_grad().to(torch::kBFloat16),
                                            filled_grad().to(torch::kDouble)};
  otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, true);
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
  expect_all_ones(grads);
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_EQ(grads[i].scalar_type(),
              std::vector<c10::ScalarType>(
                  {torch::kFloat, torch::kHalf, torch::kBFloat16, torch::kDouble})[i]);
  }
}

// The reduced-precision path multiplies in fp32 and rounds once (docs/design.md §7.3).
TEST(UnscaleKernel, ReducedPrecisionGradsAreRoundedOnceFromFp32) {
  torch::manual_seed(3);
  const torch::Tensor inv_scale = full_float({}, 1.0f / 3.0f);
  for (const c10::ScalarType dtype : {torch::kBFloat16, torch::kHalf}) {
    const torch::Tensor original = (torch::randn({64}) * 100).to(dtype);
    std::vector<torch::Tensor> grads = {original.clone()};
    torch::Tensor found_inf = full_float({}, 0.0);
    otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, true);
    const torch::Tensor expected = (original.to(torch::kFloat) * inv_scale).to(dtype);
    EXPECT_TRUE(torch::equal(grads[0], expected));
  }
}

TEST(UnscaleKernel, Fp16RejectedBeforeAnyGradIsTouched) {
  const torch::Tensor inv_scale = full_float({}, 0.25);
  torch::Tensor found_inf = full_float({}, 0.0);
  const std::vector<torch::Tensor> grads = {filled_grad(), filled_grad().to(torch::kHalf)};
  expect_error<std::invalid_argument>(
      [&] { otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, false); },
      "Attempting to unscale FP16 gradients.");
  EXPECT_TRUE(torch::equal(grads[0], filled_grad()));
}

TEST(UnscaleKernel, UndefinedGradsAreSkipped) {
  const torch::Tensor inv_scale = full_float({}, 0.25);
  torch::Tensor found_inf = full_float({}, 0.0);
  const std::vector<torch::Tensor> grads = {torch::Tensor(), filled_grad()};
  otf::unscale_grads_and_check_finite(grads, inv_scale, found_inf, false);
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(grads[1], filled_grad(1.0)));
}

// G7: the "perfect storm" of test_grad_scaling_unscale, through the optimizer-level function.
TEST(UnscaleKernel, PerfectStormOfLayoutsAndDtypesFindsAnyInjectedInf) {
  using torch::indexing::Slice;
  const auto perfect_storm_grads = [](int inject_inf) {
    std::vector<torch::Tensor> grads = {filled_grad(), filled_grad().index({Slice(), Slice(0, 5)}),
                                        filled_grad().to(torch::kHalf),
                                        filled_grad().to(torch::kHalf)};
    if (inject_inf >= 0) {
      grads[inject_inf].index_put_({2, 3}, kInf);
    }
    return grads;
  };
  std::vector<torch::Tensor> dummy_params;
  for (const torch::Tensor& grad : perfect_storm_grads(-1)) {
    dummy_params.push_back(torch::empty_like(grad));
  }
  torch::optim::SGD dummy_optimizer(dummy_params, torch::optim::SGDOptions(1.0));
  const torch::Tensor inv_scale = full_float({1}, 0.25);

  for (int inject_inf = -1; inject_inf < static_cast<int>(dummy_params.size()); ++inject_inf) {
    const std::vector<torch::Tensor> grads = perfect_storm_grads(inject_inf);
    for (size_t i = 0; i < grads.size(); ++i) {
      dummy_params[i].mutable_grad() = grads[i];
    }
    torch::Tensor found_inf = full_float({1}, 0.0);
    EXPECT_TRUE(
        otf::unscale_optimizer_grads_and_check_finite(dummy_optimizer, inv_scale, found_inf, true));
    if (inject_inf < 0) {
      EXPECT_EQ(found_inf.item<float>(), 0.0f);
      expect_all_ones(grads);
    } else {
      EXPECT_EQ(found_inf.item<float>(), 1.0f) << "inf injected into grad " << inject_inf;
    }

    // The list kernel alone sees the same.
    const std::vector<torch::Tensor> direct = perfect_storm_grads(inject_inf);
    torch::Tensor direct_found_inf = full_float({1}, 0.0);
    otf::unscale_grads_and_check_finite(direct, inv_scale, direct_found_inf, true);
    EXPECT_EQ(direct_found_inf.item<float>(), inject_inf < 0 ? 0.0f : 1.0f);
  }
}

TEST(UnscaleKernel, OptimizerWithoutGradsRecordsNoCheck) {
  TinyProblem problem;
  torch::Tensor found_inf = full_float({}, 0.0);
  EXPECT_FALSE(otf::unscale_optimizer_grads_and_check_finite(problem.optimizer, full_float({}, 0.5),
                                                             found_inf, false));
}

// G8: test_grad_scaling_update_scale.
TEST(UpdateScaleKernel, GrowsAfterIntervalAndBacksOffOnInf) {
  torch::Tensor scale = full_float({1}, 4.0);
  torch::Tensor tracker = torch::zeros({1}, torch::kInt);
  torch::Tensor found_inf = full_float({1}, 0.0);

  otf::update_scale_and_growth_tracker(scale, tracker, found_inf, 2.0, 0.25, 2);
  EXPECT_EQ(scale.item<float>(), 4.0f);
  EXPECT_EQ(tracker.item<int32_t>(), 1);
  otf::update_scale_and_growth_tracker(scale, tracker, found_inf, 2.0, 0.25, 2);
  EXPECT_EQ(scale.item<float>(), 8.0f);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
  found_inf.fill_(1.0);
  otf::update_scale_and_growth_tracker(scale, tracker, found_inf, 2.0, 0.25, 2);
  EXPECT_EQ(scale.item<float>(), 2.0f);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
}

TEST(UpdateScaleKernel, AnyNonzeroFoundInfBacksOffOnceAndResetsTracker) {
  for (const double found : {2.0, kNaN}) {
    torch::Tensor scale = full_float({}, 64.0);
    torch::Tensor tracker = torch::full({}, 5, torch::kInt);
    otf::update_scale_and_growth_tracker(scale, tracker, full_float({}, found), 2.0, 0.5, 10);
    EXPECT_EQ(scale.item<float>(), 32.0f);
    EXPECT_EQ(tracker.item<int32_t>(), 0);
  }
}

TEST(UpdateScaleKernel, RejectsWrongDtypesAndSizesWithKernelMessages) {
  torch::Tensor scale = full_float({}, 1.0);
  torch::Tensor tracker = torch::zeros({}, torch::kInt);
  torch::Tensor double_scale = full_float({}, 1.0, torch::kDouble);
  torch::Tensor long_tracker = torch::zeros({}, torch::kLong);
  const torch::Tensor found_inf = full_float({}, 0.0);
  expect_error<std::invalid_argument>(
      [&] { otf::update_scale_and_growth_tracker(double_scale, tracker, found_inf, 2.0, 0.5, 1); },
      "current_scale must be a float tensor.");
  expect_error<std::invalid_argument>(
      [&] { otf::update_scale_and_growth_tracker(scale, long_tracker, found_inf, 2.0, 0.5, 1); },
      "growth_tracker must be an int tensor.");
  expect_error<std::invalid_argument>(
      [&] {
        otf::update_scale_and_growth_tracker(scale, tracker, full_float({2}, 0.0), 2.0, 0.5, 1);
      },
      "found_inf must be a 1-element tensor.");
}

// ---------------------------------------------------------------------------------------------
// G9-G12: scale dynamics through the full scale/backward/step/update loop.

// G9
TEST(GradScaler, ScaleAndTrackerFollowGrowthIntervalAndBackoff) {
  GradScaler scaler(scaler_options(65536.0, 2.0, 0.5, 3));
  TinyProblem problem;
  const std::vector<bool> inf_pattern = {false, false, true,  false, false,
                                         false, false, false, false};
  const std::vector<double> expected_scales = {65536, 65536, 32768, 32768, 32768,
                                               65536, 65536, 65536, 131072};
  const std::vector<int64_t> expected_trackers = {1, 2, 0, 1, 2, 0, 1, 2, 0};
  std::vector<double> scales;
  std::vector<int64_t> trackers;
  for (const bool inject_inf : inf_pattern) {
    EXPECT_EQ(run_tiny_iteration(scaler, problem, inject_inf), !inject_inf);
    scales.push_back(scaler.get_scale());
    trackers.push_back(scaler.get_growth_tracker());
  }
  EXPECT_EQ(scales, expected_scales);
  EXPECT_EQ(trackers, expected_trackers);
}

// G10: test_grad_scale_will_not_overflow.
TEST(GradScaler, ScaleNeverGrowsToInf) {
  GradScaler scaler(scaler_options(1e38, 16.0, 0.5, 1));
  EXPECT_EQ(scaler.get_scale(), 1e38);  // init_scale kept exactly before scale()
  TinyProblem problem;
  problem.optimizer.zero_grad();
  scaler.scale((problem.parameter * 1e-10).sum()).backward();  // 1e28: finite
  EXPECT_TRUE(scaler.step(problem.optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), static_cast<double>(1e38f));
  EXPECT_FLOAT_EQ(static_cast<float>(scaler.get_scale()), 9.99999968e37f);
  EXPECT_TRUE(std::isfinite(scaler.get_scale()));
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
}

// G11: no lower bound on the scale.
TEST(GradScaler, ConsecutiveInfsHalveTheScaleDownToZero) {
  GradScaler scaler(scaler_options(65536.0, 2.0, 0.5, 2000));
  TinyProblem problem;
  for (int i = 1; i <= 166; ++i) {
    EXPECT_FALSE(run_tiny_iteration(scaler, problem, true));
    if (i == 16) {
      EXPECT_EQ(scaler.get_scale(), 1.0);
    }
    if (i == 165) {
      EXPECT_EQ(scaler.get_scale(), std::ldexp(1.0, -149));  // the smallest fp32 subnormal
    }
  }
  EXPECT_EQ(scaler.get_scale(), 0.0);
  EXPECT_TRUE(torch::equal(problem.parameter.detach(), torch::ones({3})));
}

// G12
TEST(GradScaler, BackoffProductIsTakenInDoubleAndRoundedToFloat) {
  GradScaler scaler(scaler_options(3.0, 2.0, 0.8, 2000));
  TinyProblem problem;
  run_tiny_iteration(scaler, problem, true);
  EXPECT_EQ(scaler.get_scale(), 2.4000000953674316);
}

TEST(GradScaler, GetScaleIsExactBeforeScaleAndFloatRoundedAfter) {
  GradScaler scaler(scaler_options(0.1, 2.0, 0.5, 2000));
  EXPECT_EQ(scaler.get_scale(), 0.1);
  scaler.scale(full_float({}, 1.0));
  EXPECT_EQ(scaler.get_scale(), 0.10000000149011612);
}

// ---------------------------------------------------------------------------------------------
// G13-G18: misuse errors.

// G13
TEST(GradScaler, UnscaleTwiceInOneIterationThrows) {
  GradScaler scaler;
  TinyProblem problem;
  problem.backward_scaled(scaler);
  scaler.unscale_(problem.optimizer);
  expect_error<std::runtime_error>(
      [&] { scaler.unscale_(problem.optimizer); },
      "unscale_() has already been called on this optimizer since the last update().");
}

// G14
TEST(GradScaler, UnscaleAfterStepThrows) {
  GradScaler scaler;
  TinyProblem problem;
  problem.backward_scaled(scaler);
  scaler.step(problem.optimizer);
  expect_error<std::runtime_error>([&] { scaler.unscale_(problem.optimizer); },
                                   "unscale_() is being called after step().");
}

// G15
TEST(GradScaler, StepTwiceBeforeUpdateThrows) {
  GradScaler scaler;
  TinyProblem problem;
  problem.backward_scaled(scaler);
  scaler.step(problem.optimizer);
  expect_error<std::runtime_error>([&] { scaler.step(problem.optimizer); },
                                   "step() has already been called since the last update().");
  scaler.update();
  problem.backward_scaled(scaler);
  EXPECT_NO_THROW(scaler.step(problem.optimizer));  // update() makes the optimizer READY again
}

// G16
TEST(GradScaler, CallsBeforeAnyScaleThrowNamingTheFunction) {
  GradScaler scaler;
  TinyProblem problem;
  expect_error<std::runtime_error>([&] { scaler.step(problem.optimizer); },
                                   "Attempted step" + kNotInitializedTail);
  expect_error<std::runtime_error>([&] { scaler.unscale_(problem.optimizer); },
                                   "Attempted unscale_" + kNotInitializedTail);
  expect_error<std::runtime_error>([&] { scaler.update(); },
                                   "Attempted update" + kNotInitializedTail);
  expect_error<std::runtime_error>([&] { scaler.update(2.0); },
                                   "Attempted update" + kNotInitializedTail);
}

// G17
TEST(GradScaler, UpdateWithoutInfChecksThrows) {
  GradScaler scaler;
  scaler.scale(full_float({}, 1.0));
  expect_error<std::runtime_error>([&] { scaler.update(); },
                                   "No inf checks were recorded prior to update.");
}

TEST(GradScaler, StepWithoutAnyGradThrows) {
  GradScaler scaler;
  TinyProblem problem;
  scaler.scale(full_float({}, 1.0));
  expect_error<std::runtime_error>([&] { scaler.step(problem.optimizer); },
                                   "No inf checks were recorded for this optimizer.");
  // The optimizer with no grads counts as unscaled but contributes nothing to update().
  expect_error<std::runtime_error>([&] { scaler.update(); },
                                   "No inf checks were recorded prior to update.");
}

// G18
TEST(GradScaler, Fp16GradsAreRejectedAndBf16GradsAccepted) {
  GradScaler scaler(scaler_options(4.0, 2.0, 0.5, 2000));
  scaler.scale(full_float({}, 1.0));
  torch::Tensor half_parameter = torch::zeros({4}, torch::kHalf);
  half_parameter.mutable_grad() = full_float({4}, 8.0, torch::kHalf);
  torch::optim::SGD half_optimizer({half_parameter}, torch::optim::SGDOptions(1.0));
  expect_error<std::invalid_argument>([&] { scaler.unscale_(half_optimizer); },
                                      "Attempting to unscale FP16 gradients.");
  expect_error<std::invalid_argument>([&] { scaler.step(half_optimizer); },
                                      "Attempting to unscale FP16 gradients.");

  torch::Tensor bf16_parameter = torch::zeros({4}, torch::kBFloat16);
  bf16_parameter.mutable_grad() = full_float({4}, 8.0, torch::kBFloat16);
  torch::optim::SGD bf16_optimizer({bf16_parameter}, torch::optim::SGDOptions(1.0));
  EXPECT_TRUE(scaler.step(bf16_optimizer));
  EXPECT_TRUE(torch::equal(bf16_parameter.grad(), full_float({4}, 2.0, torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(bf16_parameter, full_float({4}, -2.0, torch::kBFloat16)));
}

TEST(GradScaler, ClosureIsRejectedWhenEnabledAndForwardedWhenDisabled) {
  GradScaler enabled_scaler;
  TinyProblem problem;
  int closure_calls = 0;
  const auto closure = [&] {
    ++closure_calls;
    problem.optimizer.zero_grad();
    torch::Tensor loss = (problem.parameter * 2.0).sum();
    loss.backward();
    return loss;
  };
  enabled_scaler.scale(full_float({}, 1.0));
  expect_error<std::runtime_error>(
      [&] { enabled_scaler.step(problem.optimizer, closure); },
      "Closure use is not currently supported if GradScaler is enabled.");
  EXPECT_EQ(closure_calls, 0);

  GradScaler disabled_scaler(scaler_options(65536.0, 2.0, 0.5, 2000, false));
  const torch::Tensor loss = disabled_scaler.step(problem.optimizer, closure);
  EXPECT_EQ(closure_calls, 1);
  EXPECT_EQ(loss.item<float>(), 6.0f);
  EXPECT_TRUE(torch::equal(problem.parameter.detach(), full_float({3}, -1.0)));
}

// ---------------------------------------------------------------------------------------------
// update(new_scale).

TEST(GradScaler, UpdateWithNewScaleSetsScaleAndKeepsTracker) {
  GradScaler scaler(scaler_options(16.0, 2.0, 0.5, 100));
  TinyProblem problem;
  run_tiny_iteration(scaler, problem, false);
  ASSERT_EQ(scaler.get_growth_tracker(), 1);

  problem.backward_scaled(scaler);
  scaler.step(problem.optimizer);
  scaler.update(0.1);
  EXPECT_EQ(scaler.get_scale(), 0.10000000149011612);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);

  problem.backward_scaled(scaler);
  scaler.step(problem.optimizer);  // states were reset by update(new_scale)
  scaler.update(full_float({1}, 512.0));
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
  EXPECT_EQ(scaler.scale_tensor().dim(), 0);
}

TEST(GradScaler, UpdateRejectsUnsuitableScaleTensors) {
  GradScaler scaler;
  scaler.scale(full_float({}, 1.0));
  const std::string message =
      "new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor "
      "with requires_grad=False.";
  expect_error<std::invalid_argument>([&] { scaler.update(full_float({2}, 1.0)); }, message);
  expect_error<std::invalid_argument>(
      [&] { scaler.update(torch::full({}, 1.0, torch::requires_grad())); }, message);
  expect_error<std::invalid_argument>([&] { scaler.update(full_float({}, 1.0, torch::kDouble)); },
                                      message);
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

// ---------------------------------------------------------------------------------------------
// Skipped steps leave parameters and optimizer state bitwise unchanged.

std::vector<torch::Tensor> adam_state_tensors(const torch::optim::Adam& optimizer,
                                              const torch::nn::Sequential& model,
                                              std::vector<int64_t>& steps) {
  std::vector<torch::Tensor> tensors;
  steps.clear();
  for (const torch::Tensor& parameter : model->parameters()) {
    const auto& state = static_cast<const torch::optim::AdamParamState&>(
        *optimizer.state().at(otf::torch_compat::optimizer_state_key(parameter)));
    tensors.push_back(state.exp_avg().clone());
    tensors.push_back(state.exp_avg_sq().clone());
    steps.push_back(state.step());
  }
  return tensors;
}

TEST(GradScaler, SkippedStepLeavesParametersAndAdamStateBitwiseUnchanged) {
  torch::manual_seed(1);
  torch::nn::Sequential model = make_model();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  GradScaler scaler(scaler_options(1024.0, 2.0, 0.5, 1));
  const std::vector<Batch> batches = make_batches();
  const auto scaled_backward = [&](const Batch& batch) {
    optimizer.zero_grad();
    scaler.scale(torch::mse_loss(model->forward(batch.input), batch.target)).backward();
  };

  for (size_t i = 0; i < 2; ++i) {
    scaled_backward(batches[i]);
    ASSERT_TRUE(scaler.step(optimizer));
    scaler.update();
  }
  std::vector<int64_t> steps_before;
  const std::vector<torch::Tensor> state_before =
      adam_state_tensors(optimizer, model, steps_before);
  const std::vector<torch::Tensor> parameters_before = clone_all(model->parameters());
  ASSERT_EQ(steps_before.front(), 2);

  scaled_backward(batches[2]);
  second_layer_weight(model).mutable_grad().index_put_({0, 0}, kNaN);
  EXPECT_FALSE(scaler.step(optimizer));
  scaler.update();

  std::vector<int64_t> steps_after;
  const std::vector<torch::Tensor> state_after = adam_state_tensors(optimizer, model, steps_after);
  EXPECT_TRUE(bitwise_equal(parameters_before, clone_all(model->parameters())));
  EXPECT_TRUE(bitwise_equal(state_before, state_after));
  EXPECT_EQ(steps_after, steps_before);
  EXPECT_EQ(scaler.get_scale(), 2048.0);  // 1024 * 2 * 2 * 0.5

  scaled_backward(batches[3]);
  EXPECT_TRUE(scaler.step(optimizer));
  adam_state_tensors(optimizer, model, steps_after);
  EXPECT_EQ(steps_after.front(), 3);
  EXPECT_FALSE(bitwise_equal(parameters_before, clone_all(model->parameters())));
}

TEST(GradScaler, SkippedStepLeavesParametersAndSgdMomentumBitwiseUnchanged) {
  torch::manual_seed(2);
  torch::nn::Sequential model = make_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  GradScaler scaler(scaler_options(256.0, 2.0, 0.5, 2000));
  const std::vector<Batch> batches = make_batches();
  const auto momentum_buffers = [&] {
    std::vector<torch::Tensor> buffers;
    for (const torch::Tensor& parameter : model->parameters()) {
      buffers.push_back(
          static_cast<const torch::optim::SGDParamState&>(
              *optimizer.state().at(otf::torch_compat::optimizer_state_key(parameter)))
              .momentum_buffer()
              .clone());
    }
    return buffers;
  };

  optimizer.zero_grad();
  scaler.scale(torch::mse_loss(model->forward(batches[0].input), batches[0].target)).backward();
  ASSERT_TRUE(scaler.step(optimizer));
  scaler.update();
  const std::vector<torch::Tensor> buffers_before = momentum_buffers();
  const std::vector<torch::Tensor> parameters_before = clone_all(model->parameters());

  optimizer.zero_grad();
  scaler.scale(torch::mse_loss(model->forward(batches[1].input), batches[1].target)).backward();
  model->parameters()[1].mutable_grad().index_put_({3}, -kInf);
  EXPECT_FALSE(scaler.step(optimizer));
  scaler.update();

  EXPECT_TRUE(bitwise_equal(parameters_before, clone_all(model->parameters())));
  EXPECT_TRUE(bitwise_equal(buffers_before, momentum_buffers()));
}

// ---------------------------------------------------------------------------------------------
// G19-G25: PyTorch's scaling cases against an unscaled control.

// G19: test_grad_scaling_autocast's loop without autocast.
TEST(ScalingCase, ScaledTrainingMatchesUnscaledControlBitwise) {
  const ScalingCaseResult result = run_scaling_case(run_plain, true);
  EXPECT_EQ(result.scaling_log.scales_after_update, std::vector<double>({256, 512, 256, 512}));
  EXPECT_EQ(result.final_scale, 128.0 * 2 * 2 * 2 * 0.5);
  EXPECT_EQ(result.scaling_log.stepped, std::vector<bool>({true, true, false, true}));
  EXPECT_EQ(result.control_log.stepped, std::vector<bool>({true, true, false, true}));
  expect_all_close(result.control_parameters, result.scaling_parameters, 1e-5, 1e-7);
  EXPECT_TRUE(bitwise_equal(result.control_parameters, result.scaling_parameters))
      << "max difference "
      << max_abs_difference(result.control_parameters, result.scaling_parameters);
  // After step() the grads are unscaled: equal to the control's grads (except the poisoned one).
  for (size_t i = 0; i < 4; ++i) {
    if (i != kSkipIteration) {
      EXPECT_TRUE(bitwise_equal(result.control_log.grads_after_step[i],
                                result.scaling_log.grads_after_step[i]))
          << "iteration " << i;
    }
  }
}

TEST(ScalingCase, DisabledScalerTrainsExactlyLikePlainTraining) {
  const ScalingCaseResult result = run_scaling_case(run_plain, false);
  EXPECT_EQ(result.final_scale, 1.0);
  EXPECT_EQ(result.scaling_log.stepped, std::vector<bool>({true, true, true, true}));
  EXPECT_TRUE(bitwise_equal(result.control_parameters, result.scaling_parameters));
}

// G20: test_grad_scaling_autocast with CPU bf16 autocast on the forward and the loss.
TEST(ScalingCase, Bf16AutocastTrainingStaysCloseToFp32Control) {
  bool forward_ran_in_bf16 = false;
  const ScalingRun run_autocast =
      [&](const std::vector<Batch>& batches, torch::nn::Sequential& model,
          torch::optim::Optimizer& optimizer, GradScaler& scaler, bool use_scaler, RunLog& log) {
        for (size_t i = 0; i < batches.size(); ++i) {
          optimizer.zero_grad();
          if (use_scaler) {
            torch::Tensor loss;
            {
              const CpuBf16AutocastRegion autocast;
              const torch::Tensor output = model->forward(batches[i].input);
              forward_ran_in_bf16 = output.scalar_type() == torch::kBFloat16;
              loss = torch::mse_loss(output, batches[i].target);
            }
            scaler.scale(loss).backward();
            scaled_step_and_update(model, optimizer, scaler, i, log);
          } else {
            torch::mse_loss(model->forward(batches[i].input), batches[i].target).backward();
            control_step(optimizer, scaler, i, log);
          }
        }
      };
  for (const bool enabled : {true, false}) {
    const ScalingCaseResult result = run_scaling_case(run_autocast, enabled);
    EXPECT_TRUE(forward_ran_in_bf16);
    EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(
        c10::DeviceType::CPU));  // the region restored the state
    if (enabled) {
      EXPECT_EQ(result.scaling_log.scales_after_update, std::vector<double>({256, 512, 256, 512}));
      EXPECT_EQ(result.scaling_log.stepped, std::vector<bool>({true, true, false, true}));
    } else {
      EXPECT_EQ(result.final_scale, 1.0);
    }
    expect_all_close(result.control_parameters, result.scaling_parameters, 1e-5, 1e-2);
    // bf16 really was used: the result differs from fp32 training (2.8e-3 in a prototype that
    // matched PyTorch).
    const double difference =
        max_abs_difference(result.control_parameters, result.scaling_parameters);
    EXPECT_GT(difference, 0.0);
    RecordProperty(
        enabled ? "max_parameter_difference_scaled" : "max_parameter_difference_unscaled",
        std::to_string(difference));
  }
}

// G21: test_grad_scaling_clipping (clip the scaled grads to max_norm * scale).
TEST(ScalingCase, ClippingScaledGradsToScaledNormMatchesControl) {
  constexpr double kMaxNorm = 0.2;
  const ScalingRun run_clipping =
      [](const std::vector<Batch>& batches, torch::nn::Sequential& model,
         torch::optim::Optimizer& optimizer, GradScaler& scaler, bool use_scaler, RunLog& log) {
        for (size_t i = 0; i < batches.size(); ++i) {
          optimizer.zero_grad();
          const torch::Tensor loss =
              torch::mse_loss(model->forward(batches[i].input), batches[i].target);
          if (use_scaler) {
            scaler.scale(loss).backward();
            torch::nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm * scaler.get_scale());
            scaled_step_and_update(model, optimizer, scaler, i, log);
          } else {
            loss.backward();
            torch::nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm);
            control_step(optimizer, scaler, i, log);
          }
        }
      };
  for (const bool enabled : {true, false}) {
    const ScalingCaseResult result = run_scaling_case(run_clipping, enabled);
    EXPECT_EQ(result.final_scale, enabled ? 512.0 : 1.0);
    if (enabled) {
      EXPECT_EQ(result.scaling_log.stepped, std::vector<bool>({true, true, false, true}));
    }
    expect_all_close(result.control_parameters, result.scaling_parameters, 1e-5, 1e-5);
  }
}

// G22: test_grad_scaling_clipping_separate_unscale.
TEST(ScalingCase, ClippingAfterExplicitUnscaleMatchesControl) {
  constexpr double kMaxNorm = 0.2;
  const ScalingRun run_unscale_then_clip =
      [](const std::vector<Batch>& batches, torch::nn::Sequential& model,
         torch::optim::Optimizer& optimizer, GradScaler& scaler, bool use_scaler, RunLog& log) {
        for (size_t i = 0; i < batches.size(); ++i) {
          optimizer.zero_grad();
          const torch::Tensor loss =
              torch::mse_loss(model->forward(batches[i].input), batches[i].target);
          if (use_scaler) {
            scaler.scale(loss).backward();
            if (i == kSkipIteration && scaler.is_enabled()) {
              second_layer_weight(model).mutable_grad().fill_(kInf);
            }
            scaler.unscale_(optimizer);
            torch::nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm, 2.0,
                                              /*error_if_nonfinite=*/false);
            scaled_step_and_update(model, optimizer, scaler, i, log, /*inject_inf_here=*/false);
          } else {
            loss.backward();
            torch::nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm);
            control_step(optimizer, scaler, i, log);
          }
        }
      };
  for (const bool enabled : {true, false}) {
    const ScalingCaseResult result = run_scaling_case(run_unscale_then_clip, enabled);
    EXPECT_EQ(result.final_scale, enabled ? 512.0 : 1.0);
    if (enabled) {
      EXPECT_EQ(result.scaling_log.stepped, std::vector<bool>({true, true, false, true}));
    }
    expect_all_close(result.control_parameters, result.scaling_parameters, 1e-5, 1e-7);
  }
}

// G23: test_grad_scaling_accumulation.
TEST(ScalingCase, GradientAccumulationStepsEveryOtherIteration) {
  const ScalingRun run_accumulation =
      [](const std::vector<Batch>& batches, torch::nn::Sequential& model,
         torch::optim::Optimizer& optimizer, GradScaler& scaler, bool use_scaler, RunLog& log) {
        constexpr size_t kIterationsToAccumulate = 2;
        for (size_t i = 0; i < batches.size(); ++i) {
          const torch::Tensor loss =
              torch::mse_loss(model->forward(batches[i].input), batches[i].target) /
              static_cast<double>(kIterationsToAccumulate);
          if (use_scaler) {
            scaler.scale(loss).backward();
          } else {
            loss.backward();
          }
          if ((i + 1) % kIterationsToAccumulate == 0) {
            if (use_scaler) {
              log.stepped.push_back(scaler.step(optimizer));
              scaler.update();
              log.scales_after_update.push_back(scaler.get_scale());
            } else {
              optimizer.step();
              log.stepped.push_back(true);
            }
            optimizer.zero_grad();
          }
        }
      };
  for (const bool enabled : {true, false}) {
    const ScalingCaseResult result = run_scaling_case(run_accumulation, enabled);
    EXPECT_EQ(result.scaling_log.stepped, std::vector<bool>({true, true}));
    EXPECT_EQ(result.final_scale, enabled ? 512.0 : 1.0);
    if (enabled) {
      EXPECT_EQ(result.scaling_log.scales_after_update, std::vector<double>({256, 512}));
    }
    expect_all_close(result.control_parameters, result.scaling_parameters, 1e-5, 1e-7);
  }
}

// G24: test_grad_scaling_penalty (double backward through scaled grads).
TEST(ScalingCase, GradientPenaltyThroughScaledDoubleBackwardMatchesControlBitwise) {
  const ScalingRun run_penalty = [](const std::vector<Batch>& batches, torch::nn::Sequential& model,
                                    torch::optim::Optimizer& optimizer, GradScaler& scaler,
                                    bool use_scaler, RunLog& log) {
    for (size_t i = 0; i < batches.size(); ++i) {
      optimizer.zero_grad();
      torch::Tensor loss = torch::mse_loss(model->forward(batches[i].input), batches[i].target);
      std::vector<torch::Tensor> grad_params;
      if (use_scaler) {
        grad_params = torch::autograd::grad({scaler.scale(loss)}, model->parameters(), {},
                                            c10::nullopt, /*create_graph=*/true);
        const double inv_scale = 1.0 / scaler.get_scale();
        for (torch::Tensor& grad : grad_params) {
          grad = grad * inv_scale;
        }
      } else {
        grad_params = torch::autograd::grad({loss}, model->parameters(), {}, c10::nullopt,
                                            /*create_graph=*/true);
      }
      torch::Tensor grad_norm = torch::zeros({});
      for (const torch::Tensor& grad : grad_params) {
        grad_norm = grad_norm + grad.pow(2).sum();
      }
      loss = loss + grad_norm.sqrt();
      if (use_scaler) {
        scaler.scale(loss).backward();
        scaled_step_and_update(model, optimizer, scaler, i, log);
      } else {
        loss.backward();
        control_step(optimizer, scaler, i, log);
      }
    }
  };
  for (const bool enabled : {true, false}) {
    const ScalingCaseResult result = run_scaling_case(run_penalty, enabled);
    EXPECT_EQ(result.final_scale, enabled ? 512.0 : 1.0);
    expect_all_close(result.control_parameters, result.scaling_parameters, 1e-5, 1e-7);
    EXPECT_TRUE(bitwise_equal(result.control_parameters, result.scaling_parameters))
        << "max difference "
        << max_abs_difference(result.control_parameters, result.scaling_parameters);
  }
}

// G25: test_grad_scaling_multiple: two models, two optimizers, two losses sharing one scaler.
TEST(ScalingCase, TwoOptimizersSkipOnTheirOwnInfAndShareOneBackoff) {
  for (const bool enabled : {true, false}) {
    torch::manual_seed(0);
    torch::nn::Sequential control0 = make_model();
    torch::nn::Sequential scaling0 = make_copy(control0);
    const std::vector<Batch> batches = make_batches();
    torch::nn::Sequential control1 = make_model();
    torch::nn::Sequential scaling1 = make_copy(control1);
    const auto sgd = [](const torch::nn::Sequential& model) {
      return std::make_unique<torch::optim::SGD>(model->parameters(),
                                                 torch::optim::SGDOptions(1.0));
    };
    const auto control_optimizer0 = sgd(control0);
    const auto control_optimizer1 = sgd(control1);
    const auto scaling_optimizer0 = sgd(scaling0);
    const auto scaling_optimizer1 = sgd(scaling1);
    GradScaler scaler(scaler_options(128.0, 2.0, 0.5, 1, enabled));
    int steps0 = 0;
    int steps1 = 0;

    const auto run = [&](torch::nn::Sequential& model0, torch::nn::Sequential& model1,
                         torch::optim::Optimizer& optimizer0, torch::optim::Optimizer& optimizer1,
                         bool use_scaler) {
      for (size_t i = 0; i < batches.size(); ++i) {
        optimizer0.zero_grad();
        optimizer1.zero_grad();
        const torch::Tensor output0 = model0->forward(batches[i].input);
        const torch::Tensor output1 = model1->forward(batches[i].input);
        const torch::Tensor loss0 =
            torch::mse_loss(0.3 * output0 + 0.7 * output1, batches[i].target);
        const torch::Tensor loss1 =
            torch::mse_loss(0.6 * output0 - 0.4 * output1, batches[i].target);
        if (use_scaler) {
          scaler.scale(loss0).backward({}, /*retain_graph=*/true);
          scaler.scale(loss1).backward();
          if (i == kSkipIteration && scaler.is_enabled()) {
            second_layer_weight(model1).mutable_grad().fill_(kInf);
          }
          scaler.unscale_(optimizer0);  // the extra stress of PyTorch's test
          steps0 += scaler.step(optimizer0) ? 1 : 0;
          steps1 += scaler.step(optimizer1) ? 1 : 0;
          scaler.update();
        } else {
          loss0.backward({}, /*retain_graph=*/true);
          loss1.backward();
          optimizer0.step();
          if (!scaler.is_enabled() || i != kSkipIteration) {
            optimizer1.step();
          }
        }
      }
    };
    run(control0, control1, *control_optimizer0, *control_optimizer1, false);
    run(scaling0, scaling1, *scaling_optimizer0, *scaling_optimizer1, true);

    EXPECT_EQ(steps0, 4);
    EXPECT_EQ(steps1, enabled ? 3 : 4);
    EXPECT_EQ(scaler.get_scale(), enabled ? 128.0 * 2 * 2 * 2 * 0.5 : 1.0);
    std::vector<torch::Tensor> control_parameters = control0->parameters();
    std::vector<torch::Tensor> scaling_parameters = scaling0->parameters();
    for (const torch::Tensor& parameter : control1->parameters()) {
      control_parameters.push_back(parameter);
    }
    for (const torch::Tensor& parameter : scaling1->parameters()) {
      scaling_parameters.push_back(parameter);
    }
    expect_all_close(clone_all(control_parameters), clone_all(scaling_parameters), 1e-5, 1e-7);
  }
}

// ---------------------------------------------------------------------------------------------
// G26, G27: state_dict, and checkpoints through torch::serialize.

// G26: test_grad_scaling_state_dict.
TEST(GradScalerState, LoadStateDictOverwritesEverythingWithOrWithoutLazyInit) {
  for (const bool lazy_init_scale : {true, false}) {
    GradScaler source(scaler_options(3.0, 4.0, 0.5, 2));
    GradScaler target(scaler_options(6.0, 7.0, 0.8, 1));
    // Stands in for PyTorch's "s1._init_growth_tracker = 7", a value for the load to overwrite.
    target.load_state_dict(GradScalerState{6.0, 7.0, 0.8, 1, 7});
    ASSERT_EQ(target.get_growth_tracker(), 7);
    if (lazy_init_scale) {
      target.scale(full_float({1}, 4.0));
      ASSERT_EQ(target.growth_tracker_tensor().item<int32_t>(), 7);
    }

    const std::optional<GradScalerState> state = source.state_dict();
    ASSERT_TRUE(state.has_value());
    target.load_state_dict(state);

    EXPECT_EQ(target.get_scale(), 3.0);
    EXPECT_EQ(target.get_growth_factor(), 4.0);
    EXPECT_EQ(target.get_backoff_factor(), 0.5);
    EXPECT_EQ(target.get_growth_interval(), 2);
    EXPECT_EQ(target.get_growth_tracker(), 0);
    if (lazy_init_scale) {
      EXPECT_EQ(target.scale_tensor().item<float>(), 3.0f);
      EXPECT_EQ(target.growth_tracker_tensor().item<int32_t>(), 0);
    } else {
      // The loaded values are the initial ones of the first scale().
      target.scale(full_float({}, 1.0));
      EXPECT_EQ(target.scale_tensor().item<float>(), 3.0f);
      EXPECT_EQ(target.growth_tracker_tensor().item<int32_t>(), 0);
    }
  }
}

TEST(GradScalerState, StateDictReportsCurrentScaleAndTracker) {
  GradScaler scaler(scaler_options(0.1, 2.0, 0.5, 3));
  EXPECT_EQ(scaler.state_dict()->scale, 0.1);
  TinyProblem problem;
  run_tiny_iteration(scaler, problem, false);
  const GradScalerState state = *scaler.state_dict();
  EXPECT_EQ(state.scale, 0.10000000149011612);
  EXPECT_EQ(state.growth_factor, 2.0);
  EXPECT_EQ(state.backoff_factor, 0.5);
  EXPECT_EQ(state.growth_interval, 3);
  EXPECT_EQ(state.growth_tracker, 1);
}

// G27
TEST(GradScalerState, LoadingAnEmptyStateIntoAnEnabledScalerThrows) {
  GradScaler scaler;
  expect_error<std::runtime_error>(
      [&] { scaler.load_state_dict(std::nullopt); },
      "The source state dict is empty, possibly because it was saved from a disabled instance of "
      "GradScaler.");
}

std::string temporary_checkpoint_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("otf_test_grad_scaler_" + name + "_" + std::to_string(::getpid()) + ".pt"))
      .string();
}

TEST(GradScalerState, CheckpointRoundTripsBitwiseThroughAFile) {
  GradScaler scaler(scaler_options(0.1, 3.0, 0.3, 5));
  TinyProblem problem;
  run_tiny_iteration(scaler, problem, true);   // 0.1f * 0.3 rounded to float
  run_tiny_iteration(scaler, problem, false);  // tracker 1
  const GradScalerState saved = *scaler.state_dict();

  const std::string path = temporary_checkpoint_path("round_trip");
  {
    torch::serialize::OutputArchive archive;
    scaler.save(archive);
    archive.save_to(path);
  }
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  GradScaler restored;
  restored.load(archive);
  std::remove(path.c_str());

  const GradScalerState loaded = *restored.state_dict();
  EXPECT_EQ(std::memcmp(&loaded.scale, &saved.scale, sizeof(double)), 0);
  EXPECT_EQ(loaded.scale, static_cast<double>(static_cast<float>(static_cast<float>(0.1) * 0.3)));
  EXPECT_EQ(loaded.growth_factor, 3.0);
  EXPECT_EQ(loaded.backoff_factor, 0.3);
  EXPECT_EQ(loaded.growth_interval, 5);
  EXPECT_EQ(loaded.growth_tracker, 1);

  // The restored scaler continues exactly where the saved one was.
  TinyProblem other;
  run_tiny_iteration(restored, other, false);
  run_tiny_iteration(scaler, problem, false);
  EXPECT_EQ(restored.get_scale(), scaler.get_scale());
  EXPECT_EQ(restored.get_growth_tracker(), scaler.get_growth_tracker());
}

TEST(GradScalerState, CheckpointOfDisabledScalerIsEmpty) {
  const GradScaler disabled(scaler_options(65536.0, 2.0, 0.5, 2000, false));
  const std::string path = temporary_checkpoint_path("disabled");
  {
    torch::serialize::OutputArchive archive;
    disabled.save(archive);
    archive.save_to(path);
  }
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  std::remove(path.c_str());
  EXPECT_TRUE(archive.keys().empty());
  GradScaler enabled;
  expect_error<std::runtime_error>(
      [&] { enabled.load(archive); },
      "The source state dict is empty, possibly because it was saved from a disabled instance of "
      "GradScaler.");
}

// ---------------------------------------------------------------------------------------------
// G28: sparse grads (test_grad_scaling_unscale_sparse).

torch::Tensor sparse_grad(const std::vector<int64_t>& indices, const std::vector<float>& values,
                          c10::ScalarType dtype = torch::kFloat) {
  const torch::Tensor index_tensor = torch::tensor(indices, torch::kLong).view({2, 3});
  return torch::sparse_coo_tensor(index_tensor, torch::tensor(values).to(dtype), {2, 3});
}

TEST(SparseGrads, AreUnscaledThroughTheirValues) {
  const std::vector<int64_t> indices = {0, 1, 1, 2, 0, 2};
  const torch::Tensor inv_scale = full_float({1}, 0.25);
  const torch::Tensor source = sparse_grad(indices, {16, 32, 64});
  torch::Tensor parameter = source.clone();
  torch::optim::SGD optimizer({parameter}, torch::optim::SGDOptions(1.0));

  parameter.mutable_grad() = source.clone();
  torch::Tensor found_inf = full_float({1}, 0.0);
  EXPECT_TRUE(
      otf::unscale_optimizer_grads_and_check_finite(optimizer, inv_scale, found_inf, false));
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
  const torch::Tensor expected = torch::tensor({0.f, 0.f, 4.f, 8.f, 0.f, 16.f}).view({2, 3});
  EXPECT_TRUE(torch::equal(parameter.grad().to_dense(), expected));

  for (const float poison :
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    parameter.mutable_grad() = sparse_grad(indices, {16, 32, poison});
    found_inf.zero_();
    otf::unscale_optimizer_grads_and_check_finite(optimizer, inv_scale, found_inf, false);
    EXPECT_EQ(found_inf.item<float>(), 1.0f);
  }

  // The list kernel works on sparse grads directly too.
  const std::vector<torch::Tensor> direct = {source.clone()};
  found_inf.zero_();
  otf::unscale_grads_and_check_finite(direct, inv_scale, found_inf, false);
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(direct[0].to_dense(), expected));
}

TEST(SparseGrads, Fp16GradsAreCoalescedSoSummedDuplicatesOverflow) {
  const torch::Tensor inv_scale = full_float({1}, 0.25);
  const torch::Tensor source = sparse_grad({0, 1, 1, 2, 0, 2}, {16, 32, 64}, torch::kHalf);
  torch::Tensor parameter = source.clone();
  torch::optim::SGD optimizer({parameter}, torch::optim::SGDOptions(1.0));
  torch::Tensor found_inf = full_float({1}, 0.0);

  parameter.mutable_grad() = source.clone();
  otf::unscale_optimizer_grads_and_check_finite(optimizer, inv_scale, found_inf, true);
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(parameter.grad().to_dense(),
                           (source.to_dense().to(torch::kFloat) / 4).to(torch::kHalf)));

  // Finite apart, 64000 + 64000 = 128000 > 65504 once coalesced.
  const torch::Tensor uncoalesced =
      sparse_grad({0, 1, 0, 2, 0, 2}, {64000, 32, 64000}, torch::kHalf);
  ASSERT_TRUE(torch::isfinite(uncoalesced._values()).all().item<bool>());
  parameter.mutable_grad() = uncoalesced;
  found_inf.zero_();
  otf::unscale_optimizer_grads_and_check_finite(optimizer, inv_scale, found_inf, true);
  EXPECT_EQ(found_inf.item<float>(), 1.0f);
  EXPECT_TRUE(parameter.grad().is_coalesced());
  EXPECT_FALSE(parameter.grad().is_same(uncoalesced));

  parameter.mutable_grad() = source.clone();
  expect_error<std::invalid_argument>(
      [&] {
        otf::unscale_optimizer_grads_and_check_finite(optimizer, inv_scale, found_inf, false);
      },
      "Attempting to unscale FP16 gradients.");
}

// ---------------------------------------------------------------------------------------------
// G29

TEST(GradScaler, StepUsesFoundInfRecordedAtUnscaleNotLaterGrads) {
  for (const double poison : {kInf, kNaN}) {
    GradScaler scaler;
    TinyProblem problem;
    problem.backward_scaled(scaler);
    scaler.unscale_(problem.optimizer);
    problem.poison_grad(poison);
    EXPECT_TRUE(scaler.step(problem.optimizer));
    EXPECT_FALSE(torch::isfinite(problem.parameter).any().item<bool>());
    scaler.update();
    EXPECT_EQ(scaler.get_growth_tracker(), 1);  // counted as a successful step
  }
}

// ---------------------------------------------------------------------------------------------
// The found_inf reducer (distributed skip decisions).

TEST(FoundInfReducer, ReducerForcingInfSkipsTheStepAndBacksOff) {
  GradScaler scaler(scaler_options(1024.0, 2.0, 0.5, 2000));
  scaler.set_found_inf_reducer([](torch::Tensor& found_inf) { found_inf.fill_(1.0); });
  TinyProblem problem;
  EXPECT_FALSE(run_tiny_iteration(scaler, problem, false));
  EXPECT_TRUE(torch::equal(problem.parameter.detach(), torch::ones({3})));
  EXPECT_EQ(scaler.get_scale(), 512.0);
}

// Sums this rank's found_inf with the other ranks' values, as an MPI_Allreduce(SUM) would.
GradScaler::FoundInfReducer summing_reducer(std::vector<float> other_ranks, int& calls) {
  return [other_ranks = std::move(other_ranks), &calls](torch::Tensor& found_inf) {
    ++calls;
    EXPECT_EQ(found_inf.dim(), 0);
    EXPECT_EQ(found_inf.scalar_type(), torch::kFloat);
    for (const float value : other_ranks) {
      found_inf.add_(value);
    }
  };
}

TEST(FoundInfReducer, SummingReducerSkipsWhenAnyRankFoundInf) {
  int calls = 0;
  {
    GradScaler scaler(scaler_options(1024.0, 2.0, 0.5, 1));
    scaler.set_found_inf_reducer(summing_reducer({0.0f, 0.0f}, calls));
    TinyProblem problem;
    EXPECT_TRUE(run_tiny_iteration(scaler, problem, false));
    EXPECT_EQ(scaler.get_scale(), 2048.0);
  }
  {
    GradScaler scaler(scaler_options(1024.0, 2.0, 0.5, 1));
    scaler.set_found_inf_reducer(summing_reducer({0.0f, 1.0f}, calls));
    TinyProblem problem;
    EXPECT_FALSE(run_tiny_iteration(scaler, problem, false));
    EXPECT_TRUE(torch::equal(problem.parameter.detach(), torch::ones({3})));
    EXPECT_EQ(scaler.get_scale(), 512.0);
  }
  {
    // Three ranks with inf sum to 3: still a single backoff.
    GradScaler scaler(scaler_options(1024.0, 2.0, 0.5, 1));
    scaler.set_found_inf_reducer(summing_reducer({1.0f, 1.0f}, calls));
    TinyProblem problem;
    EXPECT_FALSE(run_tiny_iteration(scaler, problem, true));
    EXPECT_EQ(scaler.get_scale(), 512.0);
  }
  EXPECT_EQ(calls, 3);
}

TEST(FoundInfReducer, CalledOncePerOptimizerPerIteration) {
  int calls = 0;
  GradScaler scaler;
  scaler.set_found_inf_reducer(summing_reducer({}, calls));
  TinyProblem first;
  TinyProblem second;
  first.backward_scaled(scaler);
  second.backward_scaled(scaler);
  scaler.unscale_(first.optimizer);
  scaler.step(first.optimizer);  // already unscaled: no second call
  scaler.step(second.optimizer);
  scaler.update();
  EXPECT_EQ(calls, 2);
}

}  // namespace

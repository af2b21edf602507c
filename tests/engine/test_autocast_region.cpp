// otf::AutocastRegion: torch.autocast's enter/exit semantics on LibTorch 1.13 (nesting, restore,
// per-thread state, cast cache), the reference behaviours A1-A13 (docs/design.md §7.2), the CPU
// float16 emulation (real fp16 rounding, overflow, underflow, gradients) and the force-field
// pitfalls of docs/design.md §7.8 that the region and its kernels handle.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/library.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autocast_region.h"
#include "cpu_autocast_policy.h"
#include "torch_compat.h"

namespace {

using otf::AutocastOptions;
using otf::AutocastRegion;
using otf::Precision;

const c10::Device kCpu(c10::DeviceType::CPU);
const c10::Device kCuda(c10::DeviceType::CUDA);

// Everything an autocast region may touch on the calling thread.
struct AutocastState {
  bool cpu_enabled;
  bool gpu_enabled;
  c10::ScalarType cpu_dtype;
  c10::ScalarType gpu_dtype;
  bool cache_enabled;
  bool cpu_fp16_emulation;
  int nesting;

  bool operator==(const AutocastState& other) const {
    return cpu_enabled == other.cpu_enabled && gpu_enabled == other.gpu_enabled &&
           cpu_dtype == other.cpu_dtype && gpu_dtype == other.gpu_dtype &&
           cache_enabled == other.cache_enabled && cpu_fp16_emulation == other.cpu_fp16_emulation &&
           nesting == other.nesting;
  }
};

std::ostream& operator<<(std::ostream& out, const AutocastState& state) {
  return out << "{cpu " << state.cpu_enabled << " " << state.cpu_dtype << ", gpu "
             << state.gpu_enabled << " " << state.gpu_dtype << ", cache " << state.cache_enabled
             << ", fp16 emulation " << state.cpu_fp16_emulation << ", nesting " << state.nesting
             << "}";
}

AutocastState current_state() {
  // LibTorch exposes the nesting depth only through increment/decrement.
  const int nesting = at::autocast::increment_nesting() - 1;
  at::autocast::decrement_nesting();
  return {otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU),
          otf::torch_compat::is_autocast_enabled(c10::DeviceType::CUDA),
          otf::torch_compat::autocast_dtype(c10::DeviceType::CPU),
          otf::torch_compat::autocast_dtype(c10::DeviceType::CUDA),
          at::autocast::is_autocast_cache_enabled(),
          otf::is_cpu_fp16_emulation_enabled(),
          nesting};
}

// A1: LibTorch's defaults, which every test must find and leave behind.
const AutocastState kDefaultState{false, false, at::kBFloat16, at::kHalf, true, false, 0};

at::Tensor round_through_half(const at::Tensor& tensor) {
  return tensor.to(at::kHalf).to(at::kFloat);
}

bool is_half_representable(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kFloat && torch::equal(tensor, round_through_half(tensor));
}

class AutocastRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(current_state(), kDefaultState);
    torch::manual_seed(20240601);
  }
  void TearDown() override { EXPECT_EQ(current_state(), kDefaultState); }
};

// ----- installation -----------------------------------------------------------------------------

// Both run in a freshly executed child process ("threadsafe" death tests re-execute the binary),
// so the kernels are registered there for the first time whatever ran before in this process.
TEST(CpuAutocastPolicyInstall, OverridingLibTorchKernelsPrintsNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        testing::internal::CaptureStderr();
        otf::install_cpu_autocast_policy();
        {
          AutocastRegion region(kCpu, Precision::Float16);
          at::linear(torch::ones({2, 2}), torch::ones({2, 2}));
        }
        const std::string printed = testing::internal::GetCapturedStderr();
        std::exit(printed.find("Overriding") == std::string::npos ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

// Control for the test above: without the silencing, LibTorch does print the warning.
TEST(CpuAutocastPolicyInstall, PlainOverrideOfAnAutocastCpuKernelWarns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        testing::internal::CaptureStderr();
        torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastCPU,
                               __FILE__, __LINE__);
        library.impl("mm", torch::CppFunction::makeFallthrough());
        const std::string printed = testing::internal::GetCapturedStderr();
        std::exit(
            printed.find("Overriding a previously registered kernel") != std::string::npos ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

// Library::impl accepts names of ops that do not exist (the schema may come later), so a typo in
// the lists would silently register nothing: every listed op must exist and have our kernel.
TEST(CpuAutocastPolicyInstall, EveryListedOpExistsAndHasAnAutocastCpuKernel) {
  otf::install_cpu_autocast_policy();
  for (const auto* ops :
       {&otf::cpu_lower_precision_ops(), &otf::cpu_float32_ops(), &otf::cpu_promote_ops()}) {
    for (const std::string_view name : *ops) {
      const auto dot = name.find('.');
      const std::string base(name.substr(0, dot));
      const std::string overload =
          dot == std::string_view::npos ? "" : std::string(name.substr(dot + 1));
      const auto op = c10::Dispatcher::singleton().findSchema({"aten::" + base, overload});
      ASSERT_TRUE(op.has_value()) << "no op aten::" << name;
      EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::AutocastCPU)) << name;
    }
  }
}

// ----- enter/exit semantics ---------------------------------------------------------------------

TEST_F(AutocastRegionTest, A1DefaultsAndA2NoNativeCpuHalfYetAFloat16RegionEnters) {
  EXPECT_EQ(current_state(), kDefaultState);
  if (!otf::torch_compat::has_native_cpu_float16_autocast()) {
    try {
      otf::torch_compat::set_autocast_dtype(c10::DeviceType::CPU, at::kHalf);
      ADD_FAILURE() << "LibTorch 1.13 accepted Half as the CPU autocast dtype";
    } catch (const c10::Error& error) {
      EXPECT_NE(std::string(error.what())
                    .find("Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype"),
                std::string::npos);
    }
  }
  AutocastRegion region(kCpu, Precision::Float16);
  const AutocastState inside = current_state();
  EXPECT_TRUE(inside.cpu_enabled);
  EXPECT_EQ(inside.cpu_dtype, at::kBFloat16);  // the emulation keeps 1.13's only valid dtype
  EXPECT_TRUE(inside.cpu_fp16_emulation);
  EXPECT_EQ(inside.nesting, 1);
}

TEST_F(AutocastRegionTest, EnterSetsStateAndExitRestoresIt) {
  AutocastRegion region(kCpu, Precision::BFloat16, std::defer_lock);
  EXPECT_FALSE(region.is_entered());
  EXPECT_EQ(current_state(), kDefaultState);
  region.enter();
  EXPECT_TRUE(region.is_entered());
  EXPECT_EQ(current_state(),
            (AutocastState{true, false, at::kBFloat16, at::kHalf, true, false, 1}));
  region.exit();
  EXPECT_FALSE(region.is_entered());
  EXPECT_EQ(current_state(), kDefaultState);
  // Re-entering the same object once per batch, as the mixed-precision hook does.
  region.enter();
  EXPECT_TRUE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
  region.exit();
}

TEST_F(AutocastRegionTest, DoubleEnterAndDoubleExitAreNoOps) {
  AutocastRegion region(kCpu, Precision::Float16);
  const AutocastState inside = current_state();
  region.enter();
  EXPECT_EQ(current_state(), inside);  // no second nesting level, nothing saved twice
  region.exit();
  EXPECT_EQ(current_state(), kDefaultState);
  region.exit();
  EXPECT_EQ(current_state(), kDefaultState);
}

TEST_F(AutocastRegionTest, RegionsNestAndEachExitRestoresTheStateBeforeItsEnter) {
  AutocastRegion outer(kCpu, Precision::Float16, AutocastOptions{true, false});
  const AutocastState in_outer = current_state();
  EXPECT_EQ(in_outer, (AutocastState{true, false, at::kBFloat16, at::kHalf, false, true, 1}));
  {
    AutocastRegion middle(kCpu, Precision::BFloat16);
    const AutocastState in_middle = current_state();
    EXPECT_EQ(in_middle, (AutocastState{true, false, at::kBFloat16, at::kHalf, true, false, 2}));
    {
      AutocastRegion inner(kCuda, Precision::Float16);
      EXPECT_EQ(current_state(),
                (AutocastState{true, true, at::kBFloat16, at::kHalf, true, false, 3}));
      {
        AutocastRegion cuda_bf16(kCuda, Precision::BFloat16);
        EXPECT_EQ(current_state().gpu_dtype, at::kBFloat16);
      }
    }
    EXPECT_EQ(current_state(), in_middle);
  }
  EXPECT_EQ(current_state(), in_outer);
}

TEST_F(AutocastRegionTest, ExitOutOfNestingOrderThrowsAndLeavesStateConsistent) {
  AutocastRegion outer(kCpu, Precision::BFloat16);
  AutocastRegion inner(kCpu, Precision::Float16);
  EXPECT_THROW(outer.exit(), std::logic_error);
  EXPECT_TRUE(outer.is_entered());
  EXPECT_TRUE(otf::is_cpu_fp16_emulation_enabled());
  inner.exit();
  outer.exit();
  EXPECT_EQ(current_state(), kDefaultState);
}

TEST_F(AutocastRegionTest, Float32RegionLeavesEverythingUntouched) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({5, 4});
  {
    AutocastRegion region(kCpu, Precision::Float32);
    EXPECT_TRUE(region.is_entered());
    EXPECT_FALSE(region.changes_autocast_state());
    EXPECT_EQ(current_state(), kDefaultState);
    const auto y = at::linear(x, w);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    EXPECT_TRUE(torch::equal(y, torch::mm(x, w.t())));
  }
  // Float32 means "no autocast", not "autocast off": inside a bf16 region it changes nothing.
  AutocastRegion bf16(kCpu, Precision::BFloat16);
  const AutocastState in_bf16 = current_state();
  {
    AutocastRegion float32(kCuda, Precision::Float32);
    AutocastRegion float32_cpu(kCpu, Precision::Float32);
    EXPECT_EQ(current_state(), in_bf16);
    EXPECT_EQ(at::linear(x, w).scalar_type(), at::kBFloat16);
  }
}

TEST_F(AutocastRegionTest, UnsupportedDeviceTypeIsRejected) {
  try {
    AutocastRegion region(c10::Device(c10::DeviceType::Meta), Precision::BFloat16);
    ADD_FAILURE() << "meta device accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'meta'"), std::string::npos) << error.what();
  }
}

TEST_F(AutocastRegionTest, StateIsPerThread) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({5, 4});
  const auto plain = torch::mm(x, w.t());
  AutocastRegion region(kCpu, Precision::Float16);
  const AutocastState main_inside = current_state();

  AutocastState worker_before{};
  AutocastState worker_inside{};
  at::Tensor worker_linear;
  at::Tensor worker_bf16_linear;
  bool wrong_thread_exit_threw = false;
  std::thread worker([&] {
    worker_before = current_state();
    worker_linear = at::linear(x, w);
    AutocastRegion own(kCpu, Precision::BFloat16);
    worker_inside = current_state();
    worker_bf16_linear = at::linear(x, w);
    try {
      region.exit();  // the main thread's region: its state lives on the main thread
    } catch (const std::logic_error&) {
      wrong_thread_exit_threw = true;
    }
  });
  worker.join();

  EXPECT_EQ(worker_before, kDefaultState);
  EXPECT_TRUE(torch::equal(worker_linear, plain));  // no emulation on the worker
  EXPECT_EQ(worker_inside, (AutocastState{true, false, at::kBFloat16, at::kHalf, true, false, 1}));
  EXPECT_EQ(worker_bf16_linear.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(wrong_thread_exit_threw);
  EXPECT_TRUE(region.is_entered());
  EXPECT_EQ(current_state(), main_inside);  // the worker's region did not leak into this thread
  EXPECT_TRUE(is_half_representable(at::linear(x, w)));
}

// ----- A3-A8 and A13: which ops change dtype --------------------------------------------------

struct OpCase {
  std::string name;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> run;
  std::vector<at::Tensor> arguments;
};

std::vector<at::Tensor> cast_all(const std::vector<at::Tensor>& tensors,
                                 const std::function<at::Tensor(const at::Tensor&)>& cast) {
  std::vector<at::Tensor> casted;
  for (const auto& tensor : tensors) casted.push_back(cast(tensor));
  return casted;
}

// The lower-precision list of LibTorch 1.13's CPU autocast, each op called directly.
std::vector<OpCase> lower_precision_cases() {
  using Args = std::vector<at::Tensor>;
  return {
      {"mm",
       [](const Args& a) { return at::mm(a[0], a[1]); },
       {torch::randn({3, 4}), torch::randn({4, 5})}},
      {"addmm",
       [](const Args& a) { return at::addmm(a[0], a[1], a[2]); },
       {torch::randn({3, 5}), torch::randn({3, 4}), torch::randn({4, 5})}},
      {"bmm",
       [](const Args& a) { return at::bmm(a[0], a[1]); },
       {torch::randn({2, 3, 4}), torch::randn({2, 4, 5})}},
      {"baddbmm",
       [](const Args& a) { return at::baddbmm(a[0], a[1], a[2]); },
       {torch::randn({2, 3, 5}), torch::randn({2, 3, 4}), torch::randn({2, 4, 5})}},
      {"addbmm",
       [](const Args& a) { return at::addbmm(a[0], a[1], a[2]); },
       {torch::randn({3, 5}), torch::randn({2, 3, 4}), torch::randn({2, 4, 5})}},
      {"matmul",
       [](const Args& a) { return at::matmul(a[0], a[1]); },
       {torch::randn({2, 3, 4}), torch::randn({4, 5})}},
      {"linear 2-D",
       [](const Args& a) { return at::linear(a[0], a[1], a[2]); },
       {torch::randn({3, 4}), torch::randn({5, 4}), torch::randn({5})}},
      {"linear 3-D",
       [](const Args& a) { return at::linear(a[0], a[1], a[2]); },
       {torch::randn({2, 3, 4}), torch::randn({5, 4}), torch::randn({5})}},
      {"conv1d",
       [](const Args& a) { return at::conv1d(a[0], a[1], a[2]); },
       {torch::randn({2, 3, 8}), torch::randn({4, 3, 3}), torch::randn({4})}},
      {"conv1d.padding",
       [](const Args& a) { return at::conv1d(a[0], a[1], a[2], 1, "same"); },
       {torch::randn({2, 3, 8}), torch::randn({4, 3, 3}), torch::randn({4})}},
      {"conv2d",
       [](const Args& a) { return at::conv2d(a[0], a[1], a[2]); },
       {torch::randn({2, 3, 6, 6}), torch::randn({4, 3, 3, 3}), torch::randn({4})}},
      {"conv2d.padding",
       [](const Args& a) { return at::conv2d(a[0], a[1], a[2], 1, "same"); },
       {torch::randn({2, 3, 6, 6}), torch::randn({4, 3, 3, 3}), torch::randn({4})}},
      {"conv3d",
       [](const Args& a) { return at::conv3d(a[0], a[1], a[2]); },
       {torch::randn({1, 2, 4, 4, 4}), torch::randn({3, 2, 2, 2, 2}), torch::randn({3})}},
      {"conv3d.padding",
       [](const Args& a) { return at::conv3d(a[0], a[1], a[2], 1, "same"); },
       {torch::randn({1, 2, 4, 4, 4}), torch::randn({3, 2, 3, 3, 3}), torch::randn({3})}},
      {"conv_tbc",
       [](const Args& a) { return at::conv_tbc(a[0], a[1], a[2], 1); },
       {torch::randn({5, 2, 3}), torch::randn({3, 3, 4}), torch::randn({4})}},
      {"_convolution.deprecated",
       [](const Args& a) {
         return at::_convolution(a[0], a[1], a[2], {1}, {0}, {1}, false, {0}, 1, false, false,
                                 false);
       },
       {torch::randn({2, 3, 8}), torch::randn({4, 3, 3}), torch::randn({4})}},
  };
}

// Ops outside the list that reach it through mm/bmm/addmm (docs/design.md §7.2: einsum, tensordot,
// nn::Linear end up bf16 on CPU).
std::vector<OpCase> composite_cases() {
  using Args = std::vector<at::Tensor>;
  return {
      {"einsum",
       [](const Args& a) {
         return at::einsum("ij,jk->ik", {a[0], a[1]});
       },
       {torch::randn({3, 4}), torch::randn({4, 5})}},
      {"tensordot",
       [](const Args& a) { return at::tensordot(a[0], a[1], {1}, {0}); },
       {torch::randn({3, 4}), torch::randn({4, 5})}},
      {"nn::functional::linear 2-D",
       [](const Args& a) { return torch::nn::functional::linear(a[0], a[1], a[2]); },
       {torch::randn({3, 4}), torch::randn({5, 4}), torch::randn({5})}},
      {"nn::functional::linear 3-D, no bias",
       [](const Args& a) { return torch::nn::functional::linear(a[0], a[1]); },
       {torch::randn({2, 3, 4}), torch::randn({5, 4})}},
      {"nn::functional::linear 1-D, no bias",
       [](const Args& a) { return torch::nn::functional::linear(a[0], a[1]); },
       {torch::randn({4}), torch::randn({5, 4})}},
  };
}

// A3, and our kernel reproduces LibTorch's native bf16 policy bit for bit: every eligible
// argument cast to bf16, the op run in bf16.
TEST_F(AutocastRegionTest, A3LowerPrecisionOpsGiveBFloat16ExactlyAsNativeAutocast) {
  for (const auto& op : lower_precision_cases()) {
    at::Tensor inside;
    {
      AutocastRegion region(kCpu, Precision::BFloat16);
      inside = op.run(op.arguments);
    }
    EXPECT_EQ(inside.scalar_type(), at::kBFloat16) << op.name;
    const auto expected =
        op.run(cast_all(op.arguments, [](const at::Tensor& t) { return t.to(at::kBFloat16); }));
    EXPECT_TRUE(torch::equal(inside, expected)) << op.name;
  }
  for (const auto& op : composite_cases()) {
    AutocastRegion region(kCpu, Precision::BFloat16);
    EXPECT_EQ(op.run(op.arguments).scalar_type(), at::kBFloat16) << op.name;
  }
  // nn::Linear modules with 1-D, 2-D and 3-D input (bias included: 3-D adds it in place).
  torch::nn::Linear linear(4, 5);
  AutocastRegion region(kCpu, Precision::BFloat16);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{4}, {3, 4}, {2, 3, 4}}) {
    EXPECT_EQ(linear(torch::randn(shape)).scalar_type(), at::kBFloat16) << shape.size() << "-D";
  }
}

TEST_F(AutocastRegionTest, A4Float32ListedOpsWidenBFloat16Inputs) {
  const auto bf16 = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
  const auto a = bf16(torch::randn({4, 3}));
  const auto b = bf16(torch::randn({4, 3}));
  const auto probabilities = bf16(torch::rand({4, 3}) * 0.8 + 0.1);
  const auto labels = bf16(torch::randint(0, 2, {4, 3}).to(at::kFloat));
  const auto square = bf16(torch::eye(3) * 2 + torch::rand({3, 3}) * 0.1);
  AutocastRegion region(kCpu, Precision::BFloat16);
  const std::vector<std::pair<std::string, at::Tensor>> results{
      // LibTorch 1.13's own CPU fp32 list
      {"mse_loss", torch::mse_loss(a, b)},
      {"l1_loss", torch::l1_loss(a, b)},
      {"huber_loss", torch::huber_loss(a, b)},
      {"smooth_l1_loss", torch::smooth_l1_loss(a, b)},
      {"cross_entropy", torch::nn::functional::cross_entropy(a, torch::tensor({0, 2, 1, 0}))},
      {"binary_cross_entropy", torch::binary_cross_entropy(probabilities, labels)},
      {"binary_cross_entropy_with_logits", torch::binary_cross_entropy_with_logits(a, labels)},
      {"cdist", torch::cdist(a, b)},
      {"prod", a.prod()},
      {"inverse", torch::inverse(square)},
      {"conv_transpose1d",
       torch::conv_transpose1d(bf16(torch::randn({1, 2, 5})), bf16(torch::randn({2, 3, 3})))},
      // added by cpu_autocast_policy (CUDA's fp32 lists)
      {"sum", a.sum()},
      {"sum.dim_IntList", a.sum({1})},
      {"mean", a.mean()},
      {"mean.dim", a.mean({0})},
      {"cumsum", a.cumsum(0)},
      {"cumprod", a.cumprod(0)},
      {"softmax", a.softmax(1)},
      {"log_softmax", a.log_softmax(1)},
      {"logsumexp", a.logsumexp({1})},
      {"exp", a.exp()},
      {"log", probabilities.log()},
      {"pow.Tensor_Scalar", a.pow(2)},
      {"pow.Tensor_Tensor", probabilities.pow(a)},
      {"norm", a.norm()},
      {"norm.ScalarOpt_dim", a.norm(2, {1})},
      {"rsqrt", probabilities.rsqrt()},
      {"softplus", torch::softplus(a)},
      {"layer_norm (bf16 input, fp32 affine)",
       torch::layer_norm(a, {3}, torch::ones({3}), torch::zeros({3}))},
      {"group_norm", torch::group_norm(bf16(torch::randn({2, 4, 3})), 2)},
      {"dist", torch::dist(a, b)},
  };
  for (const auto& [name, result] : results) {
    EXPECT_EQ(result.scalar_type(), at::kFloat) << name;
  }
}

TEST_F(AutocastRegionTest, A5PromoteOpsTakeTheWidestInput) {
  const auto fp32 = torch::randn({2, 3});
  const auto bf16 = torch::randn({2, 3}).to(at::kBFloat16);
  const auto index = torch::tensor({1, 0});
  AutocastRegion region(kCpu, Precision::BFloat16);
  EXPECT_EQ(torch::cat({bf16, fp32}).scalar_type(), at::kFloat);
  EXPECT_EQ(torch::stack({bf16, fp32}).scalar_type(), at::kFloat);
  EXPECT_EQ(torch::cat({bf16, bf16}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(fp32.index_copy(0, index, bf16).scalar_type(), at::kFloat);
  EXPECT_EQ(fp32.flatten().dot(bf16.flatten()).scalar_type(), at::kFloat);
  EXPECT_EQ(
      torch::cross(torch::randn({4, 3}), torch::randn({4, 3}).to(at::kBFloat16), 1).scalar_type(),
      at::kFloat);
}

// Pitfall 2: accumulating bf16 per-atom contributions into a float32 buffer.
TEST_F(AutocastRegionTest, Pitfall2IndexAddAndScatterAddIntoFloat32BuffersInsideTheRegion) {
  const auto buffer = torch::zeros({3});
  const auto atom_to_structure = torch::tensor({0, 2, 2, 1});
  const auto contributions = torch::tensor({1.0, 2.0, 3.0, 4.0}).to(at::kBFloat16);
  EXPECT_ANY_THROW(buffer.index_add(0, atom_to_structure, contributions));  // plain 1.13
  AutocastRegion region(kCpu, Precision::BFloat16);
  const auto summed = buffer.index_add(0, atom_to_structure, contributions);
  EXPECT_EQ(summed.scalar_type(), at::kFloat);
  EXPECT_TRUE(torch::equal(summed, torch::tensor({1.0f, 4.0f, 5.0f})));
  const auto scattered = buffer.scatter_add(0, atom_to_structure, contributions);
  EXPECT_EQ(scattered.scalar_type(), at::kFloat);
  EXPECT_TRUE(torch::equal(scattered, summed));
}

TEST_F(AutocastRegionTest, A6BuiltInPromotionAndComparisons) {
  const auto fp32 = torch::randn({3});
  const auto bf16 = torch::randn({3}).to(at::kBFloat16);
  AutocastRegion region(kCpu, Precision::BFloat16);
  EXPECT_EQ(fp32.add(bf16).scalar_type(), at::kFloat);
  EXPECT_EQ(fp32.mul(bf16).scalar_type(), at::kFloat);
  EXPECT_EQ(fp32.div(bf16).scalar_type(), at::kFloat);
  EXPECT_EQ(fp32.eq(bf16).scalar_type(), at::kBool);
  EXPECT_EQ(fp32.lt(bf16).scalar_type(), at::kBool);
}

TEST_F(AutocastRegionTest, A7DoubleAndIntegerTensorsPassThroughInEveryMode) {
  const auto x = torch::randn({3, 4}, torch::kFloat64);
  const auto w = torch::randn({5, 4}, torch::kFloat64);
  const auto expected = at::linear(x, w);
  const auto integers = torch::randint(-5, 5, {3, 3});
  for (const Precision precision : {Precision::BFloat16, Precision::Float16}) {
    AutocastRegion region(kCpu, precision);
    const auto y = at::linear(x, w);
    EXPECT_EQ(y.scalar_type(), at::kDouble) << precision;
    EXPECT_TRUE(torch::equal(y, expected)) << precision;  // not rounded either
    EXPECT_EQ(at::mm(integers, integers).scalar_type(), at::kLong) << precision;
    EXPECT_EQ(x.sum().scalar_type(), at::kDouble) << precision;
  }
}

TEST_F(AutocastRegionTest, A8InPlaceAndOutVariantsAndExplicitDtypeAreNotAutocast) {
  const auto a = torch::randn({3, 4});
  const auto b = torch::randn({4, 5});
  const auto bf16 = torch::randn({6}).to(at::kBFloat16);
  for (const Precision precision : {Precision::BFloat16, Precision::Float16}) {
    AutocastRegion region(kCpu, precision);
    auto accumulated = torch::zeros({3, 5});
    accumulated.addmm_(a, b);
    EXPECT_EQ(accumulated.scalar_type(), at::kFloat) << precision;
    auto out = torch::empty({3, 5});
    at::mm_out(out, a, b);
    EXPECT_EQ(out.scalar_type(), at::kFloat) << precision;
    // Not rounded through Half under emulation either: same as plain float32.
    const auto plain = [&] {
      AutocastRegion off = AutocastRegion::disabled(kCpu);
      return torch::mm(a, b);
    }();
    EXPECT_TRUE(torch::equal(out, plain)) << precision;
    EXPECT_FALSE(is_half_representable(accumulated)) << precision;
    EXPECT_EQ(bf16.sum(at::kFloat).scalar_type(), at::kFloat) << precision;
    EXPECT_EQ(bf16.sum(at::kBFloat16).scalar_type(), at::kBFloat16) << precision;
  }
}

TEST_F(AutocastRegionTest, A9DisabledRegionInsideAnEnabledOne) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({5, 4});
  for (const Precision precision : {Precision::BFloat16, Precision::Float16}) {
    AutocastRegion outer(kCpu, precision);
    const AutocastState in_outer = current_state();
    const auto before = at::linear(x, w);
    {
      AutocastRegion off = AutocastRegion::disabled(kCpu);
      EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
      EXPECT_FALSE(otf::is_cpu_fp16_emulation_enabled());
      const auto y = at::linear(x, w);
      EXPECT_EQ(y.scalar_type(), at::kFloat);
      EXPECT_TRUE(torch::equal(y, torch::mm(x, w.t()))) << precision;
      if (precision == Precision::BFloat16) {
        // Tensors made earlier keep bf16; mixing them with fp32 weights now fails
        // (docs/design.md §7.2).
        EXPECT_ANY_THROW(at::linear(before, torch::randn({2, 5})));
      }
    }
    EXPECT_EQ(current_state(), in_outer);
    const auto after = at::linear(x, w);
    EXPECT_TRUE(torch::equal(after, before)) << precision;
    EXPECT_EQ(after.scalar_type(), precision == Precision::BFloat16 ? at::kBFloat16 : at::kFloat);
  }
  // Also for CUDA's state.
  AutocastRegion cuda(kCuda, Precision::Float16);
  {
    AutocastRegion off = AutocastRegion::disabled(kCuda);
    EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CUDA));
  }
  EXPECT_TRUE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CUDA));
}

// ----- A10 and pitfalls 7/8: the cast cache -----------------------------------------------------

// The autograd node that cast argument `index` of the op that produced `result`: a cached cast is
// the same tensor, hence the same node, on every use.
const torch::autograd::Node* cast_node(const at::Tensor& result, size_t index) {
  return result.grad_fn()->next_edge(index).function.get();
}

TEST_F(AutocastRegionTest, A10CacheHitsForLeafWeightsOnlyAndIsClearedAtOutermostExit) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({4, 5}).requires_grad_();
  // Keeps the node alive across regions (a shared_ptr in 1.13, an intrusive_ptr in 2.x).
  decltype(torch::autograd::Edge::function) first_cast;
  {
    AutocastRegion outer(kCpu, Precision::BFloat16);
    const auto y1 = at::mm(x, w);
    const auto y2 = at::mm(x, w);
    first_cast = y1.grad_fn()->next_edge(1).function;
    EXPECT_EQ(cast_node(y1, 1), cast_node(y2, 1));
    // An input without requires_grad is re-cast every time, and so is a view.
    EXPECT_NE(
        at::autocast::cached_cast(at::kBFloat16, x, c10::DeviceType::CPU).unsafeGetTensorImpl(),
        at::autocast::cached_cast(at::kBFloat16, x, c10::DeviceType::CPU).unsafeGetTensorImpl());
    const auto y3 = at::mm(x, w.t().t());
    EXPECT_NE(cast_node(y3, 1), first_cast.get());
    {
      AutocastRegion inner(kCpu, Precision::BFloat16);
      EXPECT_EQ(cast_node(at::mm(x, w), 1), first_cast.get());  // inner exit keeps the cache
    }
    EXPECT_EQ(cast_node(at::mm(x, w), 1), first_cast.get());
    {
      AutocastRegion uncached(kCpu, Precision::BFloat16, AutocastOptions{true, false});
      EXPECT_NE(cast_node(at::mm(x, w), 1), first_cast.get());
    }
  }
  AutocastRegion next(kCpu, Precision::BFloat16);
  EXPECT_NE(cast_node(at::mm(x, w), 1), first_cast.get());  // cleared by the outermost exit
}

TEST_F(AutocastRegionTest, Pitfall7NoGradValidationPassDoesNotLoseGradients) {
  torch::nn::Linear module(4, 3);
  const auto x = torch::randn({5, 4});
  const auto target = torch::randn({5, 3});
  // Two paths: nn::Linear (2-D: addmm, bias cached, weight a view) and at::linear (weight cached).
  const std::vector<std::pair<std::string, std::function<at::Tensor()>>> forwards{
      {"nn::Linear", [&] { return module(x); }},
      {"at::linear", [&] { return at::linear(x, module->weight, module->bias); }}};
  for (const auto& named_forward : forwards) {
    const std::string& name = named_forward.first;
    const std::function<at::Tensor()>& forward = named_forward.second;
    const auto gradients = [&](bool validate_first) {
      module->zero_grad();
      at::Tensor prediction;
      {
        AutocastRegion region(kCpu, Precision::BFloat16);
        if (validate_first) {
          torch::NoGradGuard no_grad;
          forward();
        }
        prediction = forward();
      }
      EXPECT_TRUE(prediction.requires_grad()) << name;
      torch::mse_loss(prediction.to(at::kFloat), target).backward();
      return std::make_pair(module->weight.grad().clone(), module->bias.grad().clone());
    };
    const auto [weight_control, bias_control] = gradients(false);
    const auto [weight_grad, bias_grad] = gradients(true);
    ASSERT_TRUE(weight_grad.defined() && bias_grad.defined()) << name;
    EXPECT_TRUE(torch::equal(weight_grad, weight_control)) << name;
    EXPECT_TRUE(torch::equal(bias_grad, bias_control)) << name;
  }
}

TEST_F(AutocastRegionTest, Pitfall8StaleCastAfterInPlaceUpdateAndFreshAfterReEnter) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({4, 5}).requires_grad_();
  AutocastRegion region(kCpu, Precision::BFloat16);
  const auto before_update = at::mm(x, w);
  {
    torch::NoGradGuard no_grad;
    w.add_(1.0);  // an optimizer step inside the region: the documented misuse
  }
  const auto fresh = at::mm(x.to(at::kBFloat16), w.detach().to(at::kBFloat16));
  EXPECT_TRUE(torch::equal(at::mm(x, w), before_update));  // LibTorch's cache: stale cast
  region.exit();
  region.enter();
  const auto after_reenter = at::mm(x, w);
  EXPECT_TRUE(torch::equal(after_reenter, fresh));
  EXPECT_FALSE(torch::equal(after_reenter, before_update));
}

// ----- A11-A13 and pitfalls 1/3: dtypes across the region boundary ------------------------------

TEST_F(AutocastRegionTest, A11GradientsOfFloat32LeavesAreFloat32) {
  torch::nn::Linear module(4, 3);
  const auto x = torch::randn({5, 4}).requires_grad_();
  for (const Precision precision : {Precision::BFloat16, Precision::Float16}) {
    module->zero_grad();
    x.mutable_grad() = at::Tensor();
    at::Tensor energy;
    {
      AutocastRegion region(kCpu, precision);
      energy = torch::silu(module(x)).sum();
    }
    energy.backward();
    EXPECT_EQ(module->weight.grad().scalar_type(), at::kFloat) << precision;
    EXPECT_EQ(module->bias.grad().scalar_type(), at::kFloat) << precision;
    EXPECT_EQ(x.grad().scalar_type(), at::kFloat) << precision;
    EXPECT_EQ(module->weight.scalar_type(), at::kFloat) << precision;
  }
}

TEST_F(AutocastRegionTest, A13CudaRegionLeavesCpuTensorsAlone) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({5, 4});
  for (const Precision precision : {Precision::BFloat16, Precision::Float16}) {
    AutocastRegion region(kCuda, precision);
    EXPECT_TRUE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CUDA));
    EXPECT_EQ(otf::torch_compat::autocast_dtype(c10::DeviceType::CUDA),
              otf::to_scalar_type(precision));
    EXPECT_FALSE(otf::torch_compat::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_FALSE(otf::is_cpu_fp16_emulation_enabled());
    const auto y = at::linear(x, w);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    EXPECT_TRUE(torch::equal(y, torch::mm(x, w.t())));
  }
}

TEST_F(AutocastRegionTest, Pitfall1BFloat16AtomicEnergiesSumExactlyInFloat32) {
  const auto atomic_energies = torch::full({1000}, -5.0, torch::kBFloat16);
  EXPECT_EQ(atomic_energies.sum().item<float>(), -4992.0f);  // plain 1.13: the bf16 sum
  AutocastRegion region(kCpu, Precision::BFloat16);
  const auto total = atomic_energies.sum();
  EXPECT_EQ(total.scalar_type(), at::kFloat);
  EXPECT_EQ(total.item<float>(), -5000.0f);
  EXPECT_EQ(atomic_energies.view({10, 100}).sum({1}).sum().item<float>(), -5000.0f);
  EXPECT_EQ(atomic_energies.mean().item<float>(), -5.0f);
}

TEST_F(AutocastRegionTest, Pitfall3WidenForLossLetsMixedDtypeLossesBackpropagate) {
  EXPECT_EQ(otf::loss_dtype(at::kBFloat16, at::kFloat), at::kFloat);
  EXPECT_EQ(otf::loss_dtype(at::kBFloat16, at::kBFloat16), at::kFloat);
  EXPECT_EQ(otf::loss_dtype(at::kHalf, at::kBFloat16), at::kFloat);
  EXPECT_EQ(otf::loss_dtype(at::kFloat, at::kDouble), at::kDouble);
  EXPECT_EQ(otf::loss_dtype(at::kFloat, at::kLong), at::kFloat);

  torch::nn::Linear module(4, 3);
  const auto x = torch::randn({5, 4});
  const auto target = torch::randn({5, 3});
  const auto predict = [&] {
    AutocastRegion region(kCpu, Precision::BFloat16);
    return module(x);
  };
#if TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13
  // The 1.13 bug the helper exists for: forward runs, backward throws.
  EXPECT_ANY_THROW(torch::mse_loss(predict(), target).backward());
#endif
  module->zero_grad();
  const auto [prediction, widened_target] = otf::widen_for_loss(predict(), target);
  EXPECT_EQ(prediction.scalar_type(), at::kFloat);
  EXPECT_EQ(widened_target.scalar_type(), at::kFloat);
  EXPECT_TRUE(widened_target.is_same(target));  // no copy when already wide enough
  torch::mse_loss(prediction, widened_target).backward();
  const auto weight_grad = module->weight.grad().clone();
  module->zero_grad();
  torch::mse_loss(predict().to(at::kFloat), target).backward();
  EXPECT_TRUE(torch::equal(weight_grad, module->weight.grad()));
}

// ----- CPU float16 emulation --------------------------------------------------------------------

TEST_F(AutocastRegionTest, Fp16EmulationRoundsOperandsAndResultsThroughHalf) {
  for (const auto& op : lower_precision_cases()) {
    at::Tensor inside;
    {
      AutocastRegion region(kCpu, Precision::Float16);
      inside = op.run(op.arguments);
    }
    EXPECT_EQ(inside.scalar_type(), at::kFloat) << op.name;
    EXPECT_TRUE(is_half_representable(inside)) << op.name;
    const auto expected = round_through_half(op.run(cast_all(op.arguments, round_through_half)));
    EXPECT_TRUE(torch::equal(inside, expected)) << op.name;
    EXPECT_FALSE(torch::equal(inside, op.run(op.arguments))) << op.name << ": not emulated";
  }
  for (const auto& op : composite_cases()) {
    AutocastRegion region(kCpu, Precision::Float16);
    EXPECT_TRUE(is_half_representable(op.run(op.arguments))) << op.name;
  }
  torch::nn::Linear module(4, 5);
  AutocastRegion region(kCpu, Precision::Float16);
  const auto y = module(torch::randn({3, 4}));
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_TRUE(is_half_representable(y));
}

TEST_F(AutocastRegionTest, Fp16EmulationOverflowsAbove65504AndFlushesTinyResultsToZero) {
  AutocastRegion region(kCpu, Precision::Float16);
  // 300 * 16 * 16 = 76800 > 65504, although every operand is a small fp16 number.
  const auto overflow = at::mm(torch::full({1, 300}, 16.0), torch::full({300, 1}, 16.0));
  EXPECT_TRUE(torch::isinf(overflow).all().item<bool>()) << overflow;
  // 65504 itself is representable; 65520 rounds up to inf.
  EXPECT_EQ(at::mm(torch::full({1, 1}, 65504.0), torch::ones({1, 1})).item<float>(), 65504.0f);
  EXPECT_TRUE(std::isinf(at::mm(torch::full({1, 1}, 65520.0), torch::ones({1, 1})).item<float>()));
  // 1e-4 * 1e-4 = 1e-8 is below half the smallest fp16 subnormal (5.96e-8).
  const auto tiny = at::mm(torch::full({1, 1}, 1e-4), torch::full({1, 1}, 1e-4));
  EXPECT_EQ(tiny.item<float>(), 0.0f);
  // Elementwise ops LibTorch 1.13 cannot run in Half on CPU still run on the float32 storage.
  const auto activated =
      torch::silu(torch::tanh(at::linear(torch::randn({2, 3}), torch::randn({4, 3}))));
  EXPECT_EQ(activated.scalar_type(), at::kFloat);
}

TEST_F(AutocastRegionTest, Fp16EmulationGradientOfAScaledLossOverflowsLikeRealFp16) {
  torch::nn::Linear module(4, 4);
  const auto x = torch::rand({8, 4}) + 0.5;  // positive: an inf gradient cannot turn into 0*inf
  const auto weight_gradient = [&](Precision precision, double loss_scale) {
    module->zero_grad();
    at::Tensor prediction;
    {
      AutocastRegion region(kCpu, precision);
      prediction = module(x);
    }
    (prediction.sum() * loss_scale).backward();  // backward outside the region, as recommended
    return module->weight.grad().clone();
  };
  const double scale = std::ldexp(1.0, 20);  // 2^20 > 65504
  const auto unscaled = weight_gradient(Precision::Float16, 1.0);
  EXPECT_TRUE(torch::isfinite(unscaled).all().item<bool>());
  EXPECT_EQ(unscaled.scalar_type(), at::kFloat);
  EXPECT_TRUE(is_half_representable(unscaled));  // weight gradients pass through Half too
  const auto scaled = weight_gradient(Precision::Float16, scale);
  EXPECT_TRUE(torch::isinf(scaled).any().item<bool>()) << scaled;
  EXPECT_EQ(scaled.scalar_type(), at::kFloat);
  // The same scaled loss is harmless in float32 and bfloat16 (float32's exponent range).
  EXPECT_TRUE(torch::isfinite(weight_gradient(Precision::Float32, scale)).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(weight_gradient(Precision::BFloat16, scale)).all().item<bool>());
  EXPECT_EQ(module->weight.scalar_type(), at::kFloat);
}

TEST_F(AutocastRegionTest, Fp16EmulationStaysActiveUnderNoGrad) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({5, 4});
  AutocastRegion region(kCpu, Precision::Float16);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(is_half_representable(at::linear(x, w)));
}

// ----- A12 and pitfall 5: forces by double backward ---------------------------------------------

struct ForceTrainingResult {
  at::Tensor energy;
  at::Tensor forces;
  at::Tensor loss;
  std::vector<at::Tensor> parameter_gradients;
};

// A toy potential: per-atom energies from a 2-layer SiLU network of the positions, summed; forces
// -dE/dx with create_graph, a force loss, and its backward (double backward).
ForceTrainingResult train_forces_once(Precision precision, bool differentiate_inside_region) {
  torch::manual_seed(7);
  torch::nn::Linear first(3, 16);
  torch::nn::Linear second(16, 1);
  const auto positions = torch::randn({8, 3}).requires_grad_();
  const auto reference_forces = torch::randn({8, 3});
  ForceTrainingResult result;
  {
    AutocastRegion region(kCpu, precision);
    result.energy = second(torch::silu(first(positions))).sum();
    if (differentiate_inside_region) {
      result.forces = -torch::autograd::grad({result.energy}, {positions}, {}, true, true)[0];
    }
  }
  if (!differentiate_inside_region) {
    result.forces = -torch::autograd::grad({result.energy}, {positions}, {}, true, true)[0];
  }
  result.loss = (result.forces - reference_forces).pow(2).mean() + result.energy.pow(2) * 1e-3;
  result.loss.backward();
  for (const auto& parameter : {first->weight, first->bias, second->weight, second->bias}) {
    result.parameter_gradients.push_back(parameter.grad());
  }
  return result;
}

TEST_F(AutocastRegionTest, A12ForceLossDoubleBackwardInsideAndAfterMixedPrecisionRegions) {
  const auto reference = train_forces_once(Precision::Float32, false);
  for (const Precision precision : {Precision::BFloat16, Precision::Float16}) {
    for (const bool inside : {false, true}) {
      const auto result = train_forces_once(precision, inside);
      const std::string label = otf::to_string(precision) + (inside ? ", grad inside" : "");
      EXPECT_EQ(result.energy.scalar_type(), at::kFloat) << label;
      EXPECT_EQ(result.forces.scalar_type(), at::kFloat) << label;
      EXPECT_TRUE(torch::allclose(result.energy, reference.energy, 0.01, 0.01))
          << label << ": " << result.energy << " vs " << reference.energy;
      EXPECT_FALSE(torch::equal(result.forces, reference.forces)) << label << ": not mixed";
      EXPECT_TRUE(torch::allclose(result.forces, reference.forces, 0.02, 0.01))
          << label << ": max diff " << (result.forces - reference.forces).abs().max();
      for (size_t i = 0; i < result.parameter_gradients.size(); ++i) {
        const auto& gradient = result.parameter_gradients[i];
        ASSERT_TRUE(gradient.defined()) << label << " parameter " << i;
        EXPECT_EQ(gradient.scalar_type(), at::kFloat) << label;
        EXPECT_TRUE(torch::isfinite(gradient).all().item<bool>()) << label;
        EXPECT_TRUE(torch::allclose(gradient, reference.parameter_gradients[i], 0.02, 0.01))
            << label << " parameter " << i << ": max diff "
            << (gradient - reference.parameter_gradients[i]).abs().max();
      }
    }
  }
}

}  // namespace

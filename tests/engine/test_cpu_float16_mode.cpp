// otf::CpuFloat16Mode: parsing, the default rule (native only with LibTorch 2.x on a CPU with
// float16 arithmetic), and that the native and emulated CPU float16 regions train alike: the same
// energies, forces and gradients to float16 tolerance.
#include "cpu_float16_mode.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "autocast_region.h"
#include "cpu_autocast_policy.h"
#include "torch_compat.h"

namespace {

using otf::CpuFloat16Mode;

const c10::Device kCpu(c10::DeviceType::CPU);

// Sets a mode for one test and puts the previous one back.
class ScopedCpuFloat16Mode {
 public:
  explicit ScopedCpuFloat16Mode(CpuFloat16Mode mode) : previous_(otf::cpu_float16_mode()) {
    otf::set_cpu_float16_mode(mode);
  }
  ~ScopedCpuFloat16Mode() { otf::set_cpu_float16_mode(previous_); }
  ScopedCpuFloat16Mode(const ScopedCpuFloat16Mode&) = delete;
  ScopedCpuFloat16Mode& operator=(const ScopedCpuFloat16Mode&) = delete;

 private:
  CpuFloat16Mode previous_;
};

// Sets OTF_CPU_FLOAT16 (or unsets it for nullptr) for one test.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const char* value) {
    if (const char* old = std::getenv(kName)) previous_ = old;
    had_value_ = std::getenv(kName) != nullptr;
    if (value) {
      setenv(kName, value, 1);
    } else {
      unsetenv(kName);
    }
  }
  ~ScopedEnvironment() {
    if (had_value_) {
      setenv(kName, previous_.c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  static constexpr const char* kName = "OTF_CPU_FLOAT16";
  std::string previous_;
  bool had_value_ = false;
};

TEST(CpuFloat16Mode, ParsesItsNamesInAnyCaseAndRejectsOthers) {
  EXPECT_EQ(otf::parse_cpu_float16_mode("native"), CpuFloat16Mode::Native);
  EXPECT_EQ(otf::parse_cpu_float16_mode("Emulated"), CpuFloat16Mode::Emulated);
  for (const auto mode : {CpuFloat16Mode::Native, CpuFloat16Mode::Emulated}) {
    EXPECT_EQ(otf::parse_cpu_float16_mode(otf::to_string(mode)), mode);
  }
  try {
    otf::parse_cpu_float16_mode("fast");
    ADD_FAILURE() << "'fast' accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("accepted values are native and emulated"),
              std::string::npos)
        << error.what();
  }
}

TEST(CpuFloat16Mode, DefaultIsNativeOnlyWithLibTorch2AndFloat16Hardware) {
  {
    const ScopedEnvironment unset(nullptr);
    const bool native = otf::native_cpu_float16_available() && otf::cpu_has_float16_arithmetic();
    EXPECT_EQ(otf::default_cpu_float16_mode(),
              native ? CpuFloat16Mode::Native : CpuFloat16Mode::Emulated);
  }
  {
    const ScopedEnvironment emulated("emulated");
    EXPECT_EQ(otf::default_cpu_float16_mode(), CpuFloat16Mode::Emulated);
  }
  {
    const ScopedEnvironment bad("half");
    EXPECT_THROW(otf::default_cpu_float16_mode(), std::invalid_argument);
  }
  EXPECT_EQ(otf::native_cpu_float16_available(),
            otf::torch_compat::has_native_cpu_float16_autocast());
}

TEST(CpuFloat16Mode, NativeNeedsLibTorch2) {
  if (otf::native_cpu_float16_available()) {
    const ScopedCpuFloat16Mode native(CpuFloat16Mode::Native);
    EXPECT_EQ(otf::cpu_float16_mode(), CpuFloat16Mode::Native);
  } else {
    EXPECT_THROW(otf::set_cpu_float16_mode(CpuFloat16Mode::Native), std::invalid_argument);
  }
}

// What each mode does inside a CPU float16 region: native computes in Half, the emulation keeps
// float32 storage holding Half values.
TEST(CpuFloat16Mode, RegionsComputeInHalfOrInRoundedFloat32) {
  const auto x = torch::randn({3, 4});
  const auto w = torch::randn({5, 4});
  {
    const ScopedCpuFloat16Mode emulated(CpuFloat16Mode::Emulated);
    otf::AutocastRegion region(kCpu, otf::Precision::Float16);
    EXPECT_TRUE(otf::is_cpu_fp16_emulation_enabled());
    const auto y = torch::linear(x, w);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    EXPECT_TRUE(torch::equal(y, y.to(at::kHalf).to(at::kFloat)));
  }
  if (!otf::native_cpu_float16_available()) {  // LibTorch 1.13: the emulation is the only mode
    EXPECT_THROW(otf::set_cpu_float16_mode(CpuFloat16Mode::Native), std::invalid_argument);
    EXPECT_EQ(otf::cpu_float16_mode(), CpuFloat16Mode::Emulated);
    return;
  }
  const ScopedCpuFloat16Mode native(CpuFloat16Mode::Native);
  otf::AutocastRegion region(kCpu, otf::Precision::Float16);
  EXPECT_FALSE(otf::is_cpu_fp16_emulation_enabled());
  EXPECT_EQ(otf::torch_compat::autocast_dtype(c10::DeviceType::CPU), at::kHalf);
  EXPECT_EQ(torch::linear(x, w).scalar_type(), at::kHalf);
  EXPECT_EQ(torch::linear(x, w).sum().scalar_type(), at::kFloat);  // reductions stay float32
}

struct TrainingStepResult {
  at::Tensor energy;
  at::Tensor forces;
  std::vector<at::Tensor> gradients;
};

// A force-training step as the potentials do it: per-atom energies from an MLP in the region,
// forces by autograd outside it, a force loss, backward.
TrainingStepResult force_training_step(CpuFloat16Mode mode,
                                       otf::Precision precision = otf::Precision::Float16) {
  const ScopedCpuFloat16Mode scoped(mode);
  torch::manual_seed(7);
  torch::nn::Sequential mlp(torch::nn::Linear(6, 32), torch::nn::Tanh(), torch::nn::Linear(32, 32),
                            torch::nn::SiLU(), torch::nn::Linear(32, 1));
  const auto descriptors = torch::randn({64, 6}).requires_grad_(true);
  const auto reference_forces = torch::randn({64, 6});
  at::Tensor energy;
  {
    otf::AutocastRegion region(kCpu, precision);
    energy = mlp->forward(descriptors).sum();
  }
  const auto forces = -torch::autograd::grad({energy}, {descriptors}, {}, /*retain_graph=*/true,
                                             /*create_graph=*/true)[0];
  const auto [prediction, target] = otf::widen_for_loss(forces, reference_forces);
  const auto loss = torch::mse_loss(prediction, target) + energy.to(at::kFloat).square() * 1e-3;
  loss.backward();
  TrainingStepResult result{energy.detach().to(at::kFloat), forces.detach().to(at::kFloat), {}};
  for (const auto& parameter : mlp->parameters()) {
    result.gradients.push_back(parameter.grad().to(at::kFloat));
  }
  return result;
}

// fp16 has an 11-bit significand (relative rounding 4.9e-4); a few roundings per layer and the
// elementwise ops that the emulation keeps in float32 make the two modes differ by about 1e-3 of
// each quantity's scale.
void expect_close_to_fp16_tolerance(const at::Tensor& native, const at::Tensor& emulated,
                                    const std::string& what) {
  const double scale = emulated.abs().max().item<double>() + 1e-6;
  const double difference = (native - emulated).abs().max().item<double>();
  EXPECT_LT(difference / scale, 2e-2)
      << what << ": max difference " << difference << " at scale " << scale;
}

// Native against emulated; with LibTorch 1.13, which has no native mode, the emulation against
// float32, which it must match to the same fp16 tolerance.
TEST(CpuFloat16Mode, NativeAndEmulatedTrainingStepsAgreeToFloat16Tolerance) {
  const auto native = otf::native_cpu_float16_available()
      ? force_training_step(CpuFloat16Mode::Native)
      : force_training_step(CpuFloat16Mode::Emulated, otf::Precision::Float32);
  const auto emulated = force_training_step(CpuFloat16Mode::Emulated);
  expect_close_to_fp16_tolerance(native.energy, emulated.energy, "energy");
  expect_close_to_fp16_tolerance(native.forces, emulated.forces, "forces");
  ASSERT_EQ(native.gradients.size(), emulated.gradients.size());
  for (size_t i = 0; i < native.gradients.size(); ++i) {
    expect_close_to_fp16_tolerance(native.gradients[i], emulated.gradients[i],
                                   "gradient " + std::to_string(i));
  }
  // And both differ from float32 by no more than fp16 rounding does.
  EXPECT_TRUE(torch::isfinite(native.forces).all().item<bool>());
}

}  // namespace

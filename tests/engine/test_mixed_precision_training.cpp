// The mixed-precision core end to end on a real force-training network: the autocast region and
// the GradScaler together, as the engine's MixedPrecisionHook will drive them. The CPU float16
// emulation must overflow for real, the scaler must skip those steps (parameters and Adam state
// untouched) and back off, and training must then proceed with finite weights in every precision.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "autocast_region.h"
#include "grad_scaler.h"
#include "precision.h"
#include "torch_compat.h"

namespace {

using otf::Precision;

struct Network : torch::nn::Module {
  Network() {
    layers = register_module("layers", torch::nn::Sequential(
        torch::nn::Linear(16, 32), torch::nn::SiLU(), torch::nn::Linear(32, 32), torch::nn::SiLU(),
        torch::nn::Linear(32, 1)));
  }
  torch::nn::Sequential layers{nullptr};
};

// A toy potential: smooth per-atom descriptors of the positions, an MLP for atomic energies.
struct Potential {
  torch::Tensor frequencies = torch::randn({3, 8}) * 0.7;

  // Energy (float64 sum of atomic energies) and forces -dE/dx with the graph kept for training.
  std::pair<torch::Tensor, torch::Tensor> energy_and_forces(Network& network,
                                                            const torch::Tensor& positions) const {
    const auto x = positions.detach().requires_grad_(true);
    const auto phases = torch::matmul(x, frequencies);
    const auto descriptors = torch::cat({torch::sin(phases), torch::cos(phases)}, 1);
    const auto energy = network.layers->forward(descriptors).to(torch::kFloat64).sum();
    const auto forces = -torch::autograd::grad({energy}, {x}, {}, true, true)[0];
    return {energy, forces};
  }
};

struct Frame {
  torch::Tensor positions, energy, forces;
};

std::vector<Frame> make_frames(Potential& potential, Network& teacher, int count) {
  std::vector<Frame> frames;
  for (int i = 0; i < count; ++i) {
    const auto positions = torch::rand({48, 3}) * 6.0;
    auto [energy, forces] = potential.energy_and_forces(teacher, positions);
    frames.push_back({positions, energy.detach(), forces.detach()});
  }
  return frames;
}

torch::Tensor force_training_loss(Network& network, const Potential& potential, const Frame& frame,
                                  Precision precision) {
  // Forward, forces and loss inside the region; backward outside (docs/design.md §7.7).
  otf::AutocastRegion region(torch::kCPU, precision);
  auto [energy, forces] = potential.energy_and_forces(network, frame.positions);
  const double atoms = static_cast<double>(frame.positions.size(0));
  const auto energy_loss = ((energy - frame.energy) / atoms).pow(2);
  const auto force_loss = torch::mse_loss(forces.to(torch::kFloat32), frame.forces);
  return force_loss + energy_loss.to(torch::kFloat32);
}

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors)
    if (t.defined() && !torch::isfinite(t).all().item<bool>()) return false;
  return true;
}

std::vector<torch::Tensor> gradients(Network& network) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : network.parameters()) grads.push_back(p.grad());
  return grads;
}

std::vector<torch::Tensor> snapshot(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const auto& t : tensors) copies.push_back(t.detach().clone());
  return copies;
}

bool bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

std::vector<torch::Tensor> adam_state(const torch::optim::Adam& optimizer, Network& network) {
  std::vector<torch::Tensor> state;
  for (const auto& p : network.parameters()) {
    const auto it = optimizer.state().find(otf::torch_compat::optimizer_state_key(p));
    if (it == optimizer.state().end()) continue;
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
    state.push_back(s.exp_avg());
    state.push_back(s.exp_avg_sq());
    state.push_back(torch::tensor(s.step()));
  }
  return state;
}

struct History {
  std::vector<bool> stepped;
  std::vector<double> scale_after_update;
  std::vector<double> loss;
  bool skipped_steps_left_everything_unchanged = true;
  bool skipped_steps_had_overflowed_gradients = true;
};

History train(Precision precision, double init_scale, int steps, bool use_scaler) {
  torch::manual_seed(7);
  Potential potential;
  Network teacher;
  const auto frames = make_frames(potential, teacher, 4);
  Network network;
  torch::optim::Adam optimizer(network.parameters(), torch::optim::AdamOptions(3e-3));
  otf::GradScalerOptions options;
  options.init_scale = init_scale;
  options.growth_interval = 1000000;  // growth would blur the back-off sequence under test
  options.enabled = use_scaler;
  otf::GradScaler scaler(options);

  History history;
  for (int step = 0; step < steps; ++step) {
    const Frame& frame = frames[static_cast<size_t>(step) % frames.size()];
    optimizer.zero_grad();
    const auto loss = force_training_loss(network, potential, frame, precision);
    scaler.scale(loss).backward();
    const auto parameters_before = snapshot(network.parameters());
    const auto adam_before = snapshot(adam_state(optimizer, network));
    const bool stepped = scaler.step(optimizer);
    scaler.update();
    history.stepped.push_back(stepped);
    history.scale_after_update.push_back(scaler.get_scale());
    history.loss.push_back(loss.item<double>());
    if (!stepped) {
      history.skipped_steps_left_everything_unchanged &=
          bitwise_equal(parameters_before, snapshot(network.parameters())) &&
          bitwise_equal(adam_before, snapshot(adam_state(optimizer, network)));
      // unscale_ keeps inf/nan where the scaled backward overflowed: the skip was real overflow.
      history.skipped_steps_had_overflowed_gradients &= !all_finite(gradients(network));
    }
  }
  EXPECT_TRUE(all_finite(network.parameters())) << "weights must stay finite";
  return history;
}

double mean_of_last(const std::vector<double>& values, size_t count) {
  double sum = 0.0;
  for (size_t i = values.size() - count; i < values.size(); ++i) sum += values[i];
  return sum / static_cast<double>(count);
}

TEST(MixedPrecisionTraining, EmulatedFp16OverflowSkipsStepsAndHalvesTheScaleUntilTrainingProceeds) {
  const double init_scale = std::ldexp(1.0, 40);
  const History history = train(Precision::Float16, init_scale, 80, /*use_scaler=*/true);

  // Some leading steps overflow in the emulated fp16 backward and are skipped...
  size_t skipped = 0;
  while (skipped < history.stepped.size() && !history.stepped[skipped]) ++skipped;
  ASSERT_GE(skipped, 5u) << "2^40 times O(1) force gradients must overflow fp16 (max 65504)";
  ASSERT_LT(skipped, history.stepped.size()) << "training never proceeded";
  // ...each halving the scale exactly (backoff 0.5, no growth in between).
  for (size_t i = 0; i < skipped; ++i)
    EXPECT_EQ(history.scale_after_update[i], std::ldexp(init_scale, -static_cast<int>(i) - 1));
  EXPECT_TRUE(history.skipped_steps_left_everything_unchanged);
  EXPECT_TRUE(history.skipped_steps_had_overflowed_gradients);
  // The scale settled where fp16 no longer overflows: far below 2^40, still a useful scale.
  EXPECT_LE(history.scale_after_update.back(), std::ldexp(1.0, 30));
  EXPECT_GE(history.scale_after_update.back(), 1.0);

  std::printf("skipped %zu leading steps; scale 2^40 -> %g; loss %g -> %g\n", skipped,
              history.scale_after_update.back(), history.loss[skipped], history.loss.back());
  // After the back-off, the network trains.
  EXPECT_LT(mean_of_last(history.loss, 8), 0.5 * history.loss[skipped]);
}

TEST(MixedPrecisionTraining, SameScaleInFloat32NeverOverflows) {
  // Control: the overflow above comes from the fp16 emulation, not from the scale itself.
  const History history = train(Precision::Float32, std::ldexp(1.0, 40), 10, /*use_scaler=*/true);
  for (const bool stepped : history.stepped) EXPECT_TRUE(stepped);
  EXPECT_EQ(history.scale_after_update.back(), std::ldexp(1.0, 40));
}

TEST(MixedPrecisionTraining, LossFallsInEveryPrecision) {
  for (const Precision precision :
       {Precision::Float32, Precision::BFloat16, Precision::Float16}) {
    const bool scaled = otf::needs_grad_scaler(precision);
    const History history = train(precision, 1024.0, 80, scaled);
    for (const bool stepped : history.stepped) EXPECT_TRUE(stepped) << precision;
    EXPECT_LT(mean_of_last(history.loss, 8), 0.5 * history.loss.front())
        << precision << ": first " << history.loss.front() << ", last "
        << history.loss.back();
    std::printf("%s: loss %g -> %g over 80 steps\n", otf::to_string(precision).c_str(),
                history.loss.front(), mean_of_last(history.loss, 8));
  }
}

}  // namespace

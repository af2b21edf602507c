// GPU check of the Kokkos-to-LibTorch device mapping (src/kokkos_device.h) with a CUDA LibTorch:
// a CUDA Kokkos space maps to cuda:N, and on that device a small committee-style energy model's
// forces (autograd, double backward for a force loss) and an Adam step run and agree with the
// CPU to float32 rounding. Built and run by run_gpu_check.sh on a machine with a GPU.
#include <torch/torch.h>

#include <cstdio>

#include "kokkos_device.h"

namespace {

struct Result {
  double energy;
  torch::Tensor forces;
  torch::Tensor weight_after_step;
};

Result train_step(const c10::Device& device) {
  torch::manual_seed(7);
  auto positions = torch::rand({64, 3}, torch::kFloat64).mul(8.0).to(torch::kFloat32);
  auto model = torch::nn::Sequential(torch::nn::Linear(16, 32), torch::nn::SiLU(),
                                     torch::nn::Linear(32, 1));
  model->to(device);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto x = positions.to(device).requires_grad_(true);
  // A smooth pair descriptor: Gaussian radial features of all pair distances per atom.
  auto r = (x.unsqueeze(0) - x.unsqueeze(1)).pow(2).sum(-1).add(1e-6).sqrt();
  auto centers = torch::linspace(1.0, 6.0, 16, torch::TensorOptions().device(device));
  auto features = (-(r.unsqueeze(-1) - centers).pow(2)).exp().sum(1);
  auto energy = model->forward(features).sum();
  auto forces = -torch::autograd::grad({energy}, {x}, {}, true, true)[0];
  auto loss = forces.pow(2).mean() + energy.pow(2) * 1e-6;
  adam.zero_grad();
  loss.backward();
  adam.step();
  return {energy.item<double>(), forces.detach().cpu(),
          model->parameters()[0].detach().cpu().clone()};
}

}  // namespace

int main() {
  const c10::Device gpu = otf::torch_device_for_kokkos("Cuda", 0);
  const c10::Device host = otf::torch_device_for_kokkos("Serial", -1);
  std::printf("Kokkos Cuda device 0 -> %s; Kokkos Serial -> %s; devices[0] = %s\n",
              gpu.str().c_str(), host.str().c_str(), otf::training_devices(gpu)[0].str().c_str());
  const Result on_gpu = train_step(gpu);
  const Result on_cpu = train_step(host);
  const double force_diff = (on_gpu.forces - on_cpu.forces).abs().max().item<double>() /
                            on_cpu.forces.abs().max().item<double>();
  const double weight_diff = (on_gpu.weight_after_step - on_cpu.weight_after_step).abs().max().item<double>();
  std::printf("energy gpu %.9g cpu %.9g; forces differ by %.3g (relative to max); weights after "
              "one Adam step differ by %.3g\n", on_gpu.energy, on_cpu.energy, force_diff, weight_diff);
  const bool ok = force_diff < 1e-4 && weight_diff < 1e-5;
  std::printf("%s\n", ok ? "GPU CHECK PASSED" : "GPU CHECK FAILED");
  return ok ? 0 : 1;
}

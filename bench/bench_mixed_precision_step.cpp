// Step time of a small force-training network in float32, bfloat16 and emulated float16 on this
// CPU, printed as ratios to float32 measured in the same run (machines here are noisy, so only
// same-run ratios mean something).
//
// One step, as the engine's mixed-precision hook runs it: inside the autocast region, per-atom
// descriptors -> MLP (3 hidden layers of the given width, SiLU) -> atomic energies, total energy
// summed in float64, forces = -dE/dx by autograd with create_graph, energy + force loss; outside
// the region, (scaled) backward through the double-backward graph and an Adam step (through the
// GradScaler for float16).
//
// Usage: bench_mixed_precision_step [--atoms N] [--repeats R] [--threads T] [--widths 64,256]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "grad_scaler.h"
#include "precision.h"

#include "bench_timing.h"

namespace {

struct Options {
  int64_t atoms = 16384;
  int repeats = 7;
  int threads = 1;
  std::vector<int64_t> widths{64, 256};
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--atoms") {
      options.atoms = std::stoll(value);
    } else if (key == "--repeats") {
      options.repeats = std::stoi(value);
    } else if (key == "--threads") {
      options.threads = std::stoi(value);
    } else if (key == "--widths") {
      options.widths.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) options.widths.push_back(std::stoll(item));
    } else {
      std::fprintf(stderr, "unknown option %s (expected --atoms, --repeats, --threads, --widths)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  return options;
}

// Smooth per-atom descriptors of the positions (random Fourier features): cheap, twice
// differentiable, and leaving the MLP as the cost that precision changes.
struct ForceTrainingProblem {
  torch::Tensor positions;         // [atoms, 3], float32
  torch::Tensor reference_forces;  // [atoms, 3]
  torch::Tensor reference_energy;  // scalar, float64
  torch::Tensor frequencies;       // [3, 16]
};

struct Network : torch::nn::Module {
  explicit Network(int64_t width) {
    layers = register_module("layers", torch::nn::Sequential(
        torch::nn::Linear(32, width), torch::nn::SiLU(), torch::nn::Linear(width, width),
        torch::nn::SiLU(), torch::nn::Linear(width, width), torch::nn::SiLU(),
        torch::nn::Linear(width, 1)));
  }
  torch::Tensor forward(const torch::Tensor& descriptors) { return layers->forward(descriptors); }
  torch::nn::Sequential layers{nullptr};
};

double train_step(Network& network, torch::optim::Adam& optimizer, otf::GradScaler* scaler,
                  const ForceTrainingProblem& problem, otf::Precision precision) {
  const auto start = std::chrono::steady_clock::now();
  optimizer.zero_grad();
  torch::Tensor loss;
  {
    otf::AutocastRegion region(torch::kCPU, precision);
    const auto positions = problem.positions.detach().requires_grad_(true);
    const auto phases = torch::matmul(positions, problem.frequencies);
    const auto descriptors = torch::cat({torch::sin(phases), torch::cos(phases)}, 1);
    const auto atomic_energies = network.forward(descriptors);
    const auto energy = atomic_energies.to(torch::kFloat64).sum();
    const auto forces = -torch::autograd::grad({energy}, {positions}, {}, true, true)[0];
    const auto n = static_cast<double>(problem.positions.size(0));
    loss = torch::mse_loss(forces.to(torch::kFloat32), problem.reference_forces) +
           ((energy - problem.reference_energy) / n).pow(2).to(torch::kFloat32);
  }
  if (scaler != nullptr) {
    scaler->scale(loss).backward();
    scaler->step(optimizer);
    scaler->update();
  } else {
    loss.backward();
    optimizer.step();
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

// bfloat16 is only fast where the CPU multiplies bf16 in hardware (AVX512_BF16 or AMX, used by
// oneDNN); elsewhere LibTorch emulates it and bf16 is several times slower than float32. The
// header line says which case a result belongs to.
std::string cpu_description() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(cpuinfo, line)) {
    if (model == "unknown CPU" && line.rfind("model name", 0) == 0)
      model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line + " ";
  }
  std::string features;
  for (const char* feature : {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    features += std::string(" ") + feature + (flags.find(std::string(" ") + feature + " ") !=
                                                      std::string::npos
                                                  ? "=yes"
                                                  : "=no");
  return model + ";" + features;
}

using otf::bench::median;

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  at::set_num_threads(options.threads);
  torch::manual_seed(0);

  ForceTrainingProblem problem;
  problem.positions = torch::rand({options.atoms, 3}) * 30.0;
  problem.frequencies = torch::randn({3, 16}) * 0.5;
  problem.reference_forces = torch::randn({options.atoms, 3});
  problem.reference_energy = torch::tensor(-4.3 * static_cast<double>(options.atoms), torch::kFloat64);

  const std::vector<otf::Precision> precisions{otf::Precision::Float32, otf::Precision::BFloat16,
                                               otf::Precision::Float16};
  std::printf("# CPU: %s\n", cpu_description().c_str());
  std::printf("# force-training step, %lld atoms, %d thread(s), median of %d steps\n",
              static_cast<long long>(options.atoms), options.threads, options.repeats);
  std::printf("%-6s %-9s %12s %14s\n", "width", "precision", "ms/step", "ratio_to_fp32");
  for (const int64_t width : options.widths) {
    std::map<otf::Precision, std::vector<double>> times;
    std::map<otf::Precision, std::shared_ptr<Network>> networks;
    std::vector<std::unique_ptr<torch::optim::Adam>> optimizers;
    std::map<otf::Precision, torch::optim::Adam*> optimizer_of;
    std::map<otf::Precision, std::unique_ptr<otf::GradScaler>> scalers;
    for (const auto precision : precisions) {
      torch::manual_seed(1);
      networks[precision] = std::make_shared<Network>(width);
      optimizers.push_back(std::make_unique<torch::optim::Adam>(
          networks.at(precision)->parameters(), torch::optim::AdamOptions(1e-4)));
      optimizer_of[precision] = optimizers.back().get();
      if (otf::needs_grad_scaler(precision)) {
        // A scale the forces cannot overflow at, so every timed step is a real optimizer step.
        otf::GradScalerOptions scaler_options;
        scaler_options.init_scale = 256.0;
        scalers[precision] = std::make_unique<otf::GradScaler>(scaler_options);
      }
      // Warm-up (first-call allocation and oneDNN kernel selection).
      train_step(*networks.at(precision), *optimizer_of[precision], scalers[precision].get(),
                 problem, precision);
    }
    // Interleave precisions so slow drifts of the machine hit all of them alike.
    for (int r = 0; r < options.repeats; ++r) {
      for (const auto precision : precisions) {
        times[precision].push_back(train_step(*networks.at(precision), *optimizer_of[precision],
                                              scalers[precision].get(), problem, precision));
      }
    }
    const double fp32 = median(times[otf::Precision::Float32]);
    for (const auto precision : precisions) {
      const double ms = median(times[precision]);
      std::printf("%-6lld %-9s %12.1f %14.2f\n", static_cast<long long>(width),
                  otf::to_string(precision).c_str(), ms, fp32 / ms);
    }
  }
  std::printf("# ratio_to_fp32 = fp32 time / this time (above 1: faster than fp32)\n");
  return 0;
}

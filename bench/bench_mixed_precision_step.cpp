// Step time of a small force-training network in float32, bfloat16 and float16 (emulated, and
// native where LibTorch 2.x has it) on this CPU, and the time of an inference step (energy and
// forces, no training) of the same network, printed as ratios to float32 measured in the same run
// (machines here are noisy, so only same-run ratios mean something).
//
// One step, as the engine's mixed-precision hook runs it: inside the autocast region, per-atom
// descriptors -> MLP (3 hidden layers of the given width, SiLU) -> atomic energies, total energy
// summed in float64, forces = -dE/dx by autograd with create_graph, energy + force loss; outside
// the region, (scaled) backward through the double-backward graph and an Adam step (through the
// GradScaler for float16). Inference, as pair_style otf evaluates: the same forward in the region
// and forces by autograd without create_graph, nothing else.
//
// Usage: bench_mixed_precision_step [--atoms N] [--repeats R] [--threads T] [--widths 64,256]
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autocast_region.h"
#include "cpu_float16_mode.h"
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

// One measured configuration: a precision and, for float16, how the CPU computes it.
struct Variant {
  std::string label;
  otf::Precision precision;
  otf::CpuFloat16Mode float16_mode = otf::CpuFloat16Mode::Emulated;
};

// Per-atom energies in the autocast region, total energy in float64, forces by autograd.
std::pair<torch::Tensor, torch::Tensor> energy_and_forces(Network& network,
                                                          const ForceTrainingProblem& problem,
                                                          otf::Precision precision,
                                                          bool create_graph) {
  otf::AutocastRegion region(torch::kCPU, precision);
  const auto positions = problem.positions.detach().requires_grad_(true);
  const auto phases = torch::matmul(positions, problem.frequencies);
  const auto descriptors = torch::cat({torch::sin(phases), torch::cos(phases)}, 1);
  const auto atomic_energies = network.forward(descriptors);
  const auto energy = atomic_energies.to(torch::kFloat64).sum();
  const auto forces =
      -torch::autograd::grad({energy}, {positions}, {}, create_graph, create_graph)[0];
  return {energy, forces};
}

double train_step(Network& network, torch::optim::Adam& optimizer, otf::GradScaler* scaler,
                  const ForceTrainingProblem& problem, const Variant& variant) {
  otf::set_cpu_float16_mode(variant.float16_mode);
  const auto start = std::chrono::steady_clock::now();
  optimizer.zero_grad();
  torch::Tensor loss;
  {
    const auto [energy, forces] = energy_and_forces(network, problem, variant.precision, true);
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

double inference_step(Network& network, const ForceTrainingProblem& problem,
                      const Variant& variant) {
  otf::set_cpu_float16_mode(variant.float16_mode);
  const auto start = std::chrono::steady_clock::now();
  const auto [energy, forces] = energy_and_forces(network, problem, variant.precision, false);
  (void)energy;
  (void)forces;
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
  for (const char* feature : {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16"})
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

  std::vector<Variant> variants{{"float32", otf::Precision::Float32},
                                {"bfloat16", otf::Precision::BFloat16},
                                {"float16-emulated", otf::Precision::Float16}};
  if (otf::native_cpu_float16_available()) {
    variants.push_back({"float16-native", otf::Precision::Float16, otf::CpuFloat16Mode::Native});
  }
  std::printf("# CPU: %s\n", cpu_description().c_str());
  std::printf("# LibTorch %s, CPU float16 default: %s\n", TORCH_VERSION,
              otf::to_string(otf::default_cpu_float16_mode()).c_str());
  std::printf("# force-training and inference steps, %lld atoms, %d thread(s), median of %d\n",
              static_cast<long long>(options.atoms), options.threads, options.repeats);
  std::printf("%-6s %-17s %10s %8s %10s %8s\n", "width", "precision", "train_ms", "ratio",
              "infer_ms", "ratio");
  for (const int64_t width : options.widths) {
    std::vector<std::vector<double>> train_times(variants.size()), infer_times(variants.size());
    std::vector<std::shared_ptr<Network>> networks;
    std::vector<std::unique_ptr<torch::optim::Adam>> optimizers;
    std::vector<std::unique_ptr<otf::GradScaler>> scalers;
    for (const auto& variant : variants) {
      torch::manual_seed(1);
      networks.push_back(std::make_shared<Network>(width));
      optimizers.push_back(std::make_unique<torch::optim::Adam>(
          networks.back()->parameters(), torch::optim::AdamOptions(1e-4)));
      scalers.emplace_back();
      if (otf::needs_grad_scaler(variant.precision)) {
        // A scale the forces cannot overflow at, so every timed step is a real optimizer step.
        otf::GradScalerOptions scaler_options;
        scaler_options.init_scale = 256.0;
        scalers.back() = std::make_unique<otf::GradScaler>(scaler_options);
      }
      // Warm-up (first-call allocation and oneDNN kernel selection).
      train_step(*networks.back(), *optimizers.back(), scalers.back().get(), problem, variant);
      inference_step(*networks.back(), problem, variant);
    }
    // Interleave variants so slow drifts of the machine hit all of them alike.
    for (int r = 0; r < options.repeats; ++r) {
      for (size_t v = 0; v < variants.size(); ++v) {
        train_times[v].push_back(
            train_step(*networks[v], *optimizers[v], scalers[v].get(), problem, variants[v]));
        infer_times[v].push_back(inference_step(*networks[v], problem, variants[v]));
      }
    }
    const double train_fp32 = median(train_times[0]);
    const double infer_fp32 = median(infer_times[0]);
    for (size_t v = 0; v < variants.size(); ++v) {
      const double train_ms = median(train_times[v]);
      const double infer_ms = median(infer_times[v]);
      std::printf("%-6lld %-17s %10.1f %8.2f %10.1f %8.2f\n", static_cast<long long>(width),
                  variants[v].label.c_str(), train_ms, train_fp32 / train_ms, infer_ms,
                  infer_fp32 / infer_ms);
    }
  }
  std::printf("# ratio = float32 time / this time (above 1: faster than float32)\n");
  return 0;
}

// Overhead of the training engine: one training step through TrainingStrategy::train_batch (stage
// dispatch, update orchestrator, MixedPrecisionHook) versus a hand-written LibTorch loop doing the
// same work (zero_grad, forward, forces by autograd, loss, backward, Adam step), on a 4096-atom
// force-training batch, in the same run, interleaved. Target: under 3% overhead.
//
// Usage: bench_engine_overhead [--atoms 4096] [--repeats 61] [--width 128] [--threads 1]
//                              [--tuned-malloc]
#include <torch/torch.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "grad_scaler.h"
#include "mixed_precision_hook.h"
#include "optimizer_factory.h"
#include "training_strategy.h"
#include "training_update_orchestrator.h"

#include "bench_timing.h"

namespace {

struct Options {
  int64_t atoms = 4096;
  int repeats = 61;
  int64_t width = 128;
  int threads = 1;
  bool tuned_malloc = false;
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--tuned-malloc") {
      options.tuned_malloc = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", key.c_str());
      std::exit(2);
    }
    const std::string value = argv[i + 1];
    if (key == "--atoms") {
      options.atoms = std::stoll(value);
    } else if (key == "--repeats") {
      options.repeats = std::stoi(value);
    } else if (key == "--width") {
      options.width = std::stoll(value);
    } else if (key == "--threads") {
      options.threads = std::stoi(value);
    } else {
      std::fprintf(stderr, "unknown option %s (expected --atoms, --repeats, --width, --threads, --tuned-malloc)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  return options;
}

struct Network : torch::nn::Module {
  explicit Network(int64_t width) {
    layers = register_module("layers", torch::nn::Sequential(
        torch::nn::Linear(32, width), torch::nn::SiLU(), torch::nn::Linear(width, width),
        torch::nn::SiLU(), torch::nn::Linear(width, 1)));
  }
  torch::nn::Sequential layers{nullptr};
};

// The model forward shared by both loops: descriptors of the positions, atomic energies, total
// energy in float64, forces = -dE/dx with the graph kept for the force loss.
otf::Predictions predict(Network& network, const torch::Tensor& frequencies,
                         const torch::Tensor& positions_in) {
  const auto positions = positions_in.detach().requires_grad_(true);
  const auto phases = torch::matmul(positions, frequencies);
  const auto descriptors = torch::cat({torch::sin(phases), torch::cos(phases)}, 1);
  const auto energy = network.layers->forward(descriptors).to(torch::kFloat64).sum();
  const auto forces = -torch::autograd::grad({energy}, {positions}, {}, true, true)[0];
  return {{"energy", energy.reshape({1})}, {"forces", forces}};
}

torch::Tensor force_loss(const otf::Predictions& predictions, const otf::TrainingBatch& batch) {
  return torch::mse_loss(predictions.at("forces").to(torch::kFloat32), batch.at("forces"));
}

std::unique_ptr<torch::optim::Optimizer> adam(std::vector<torch::Tensor> parameters) {
  otf::OptimizerSettings settings;
  settings.learning_rate = 1e-4;
  return otf::make_optimizer(otf::OptimizerKind::Adam, std::move(parameters), settings);
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

using otf::bench::median;

void compare(otf::Precision precision, const Options& options, const otf::TrainingBatch& batch,
             const torch::Tensor& frequencies) {
  // Hand-written loop.
  torch::manual_seed(3);
  auto hand_network = std::make_shared<Network>(options.width);
  auto hand_optimizer = adam(hand_network->parameters());
  otf::GradScaler scaler(otf::GradScalerOptions{256.0, 2.0, 0.5, 2000, true});
  const auto hand_step = [&] {
    otf::zero_gradients({hand_optimizer.get()});  // set_to_none, as the engine does
    torch::Tensor loss;
    {
      otf::AutocastRegion region(torch::kCPU, precision);
      loss = force_loss(predict(*hand_network, frequencies, batch.at("positions")), batch);
    }
    if (otf::needs_grad_scaler(precision)) {
      scaler.scale(loss).backward();
      scaler.step(*hand_optimizer);
      scaler.update();
    } else {
      loss.backward();
      hand_optimizer->step();
    }
  };

  // The same work through the engine.
  torch::manual_seed(3);
  otf::TrainingStrategyOptions strategy_options;
  strategy_options.models["main"] = std::make_shared<Network>(options.width);
  strategy_options.training_fn = [&frequencies](const otf::NamedModels& models,
                                                const otf::TrainingBatch& b) {
    return predict(*models.at("main")->as<Network>(), frequencies, b.at("positions"));
  };
  strategy_options.loss_fn = [](const otf::Predictions& predictions, const otf::TrainingBatch& b,
                                int64_t, int64_t) {
    otf::LossOutput out;
    out.total_loss = force_loss(predictions, b);
    out.per_component_unweighted["forces"] = out.total_loss;
    out.per_component_weight["forces"] = 1.0;
    return out;
  };
  otf::OptimizerConfig optimizer_config;
  optimizer_config.make_optimizer = adam;
  strategy_options.optimizer_configs = {optimizer_config};
  strategy_options.hooks = {std::make_shared<otf::MixedPrecisionHook>(
      precision, otf::GradScalerOptions{256.0, 2.0, 0.5, 2000, true})};
  otf::TrainingStrategy strategy(std::move(strategy_options));
  otf::TrainingStrategy::Scope scope(strategy);  // as the LAMMPS fix holds it over a run

  hand_step();  // warm-up: first-call allocations
  strategy.train_batch(batch);
  std::vector<double> hand_ms, engine_ms;
  for (int r = 0; r < options.repeats; ++r) {
    // Alternate which goes first, so neither always runs on a warmer cache.
    for (int order = 0; order < 2; ++order) {
      if ((order == 0) == (r % 2 == 0)) {
        const auto start = std::chrono::steady_clock::now();
        hand_step();
        hand_ms.push_back(milliseconds_since(start));
      } else {
        const auto start = std::chrono::steady_clock::now();
        strategy.train_batch(batch);
        engine_ms.push_back(milliseconds_since(start));
      }
    }
  }
  const double hand = median(hand_ms);
  const double engine = median(engine_ms);
  const double hand_best = *std::min_element(hand_ms.begin(), hand_ms.end());
  const double engine_best = *std::min_element(engine_ms.begin(), engine_ms.end());
  std::printf("%-9s %14.2f %14.2f %12.2f%% %12.2f%%\n", otf::to_string(precision).c_str(), hand, engine,
              100.0 * (engine / hand - 1.0), 100.0 * (engine_best / hand_best - 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  if (options.tuned_malloc) {
    // glibc returns large freed blocks to the kernel (mmap threshold, heap trimming), and the
    // next step page-faults them back in; how often depends on the order tensors are freed.
    // Keeping freed memory in the heap takes that noise out of both loops alike.
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  at::set_num_threads(options.threads);
  torch::manual_seed(0);
  const auto positions = torch::rand({options.atoms, 3}) * 30.0;
  const otf::TrainingBatch batch(
      {{"positions", positions}, {"forces", torch::randn({options.atoms, 3})}});
  const auto frequencies = torch::randn({3, 16}) * 0.5;

  std::printf("# one training step, %lld atoms, MLP width %lld, %d thread(s), %d steps each, %s\n",
              static_cast<long long>(options.atoms), static_cast<long long>(options.width),
              options.threads, options.repeats,
              options.tuned_malloc ? "glibc malloc keeps freed memory" : "default glibc malloc");
  std::printf("%-9s %14s %14s %13s %13s\n", "precision", "hand_loop_ms", "strategy_ms",
              "overhead", "best_vs_best");
  compare(otf::Precision::Float32, options, batch, frequencies);
  compare(otf::Precision::Float16, options, batch, frequencies);
  std::printf("# overhead = median strategy step / median hand-written step - 1 (target: under 3%%);\n"
              "# best_vs_best compares the fastest steps\n");
  return 0;
}

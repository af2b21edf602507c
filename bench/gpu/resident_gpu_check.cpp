// GPU check of the model on a CUDA device (issue: Kokkos and CUDA paths), for a machine with a GPU
// and a CUDA LibTorch; built and run by run_gpu_check.sh. On cuda:0 it checks, against the CPU:
//  1. ResidentEvaluator (otf/kk's GPU path) over cuda tensors laid out as a CUDA Kokkos build lays
//     out its views (neighbour matrix column-major, headroom rows): energies, forces, per-atom
//     virials, in float32, bfloat16 and float16;
//  2. PotentialEvaluator (host arrays) with the model on the GPU: the same numbers;
//  3. the training path (predict with a force loss, double backward, Adam) on the GPU: the same
//     weights after three steps as on the CPU, to float32 rounding.
// Prints one line per check and exits 1 on a miss.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model_spec.h"
#include "neighbor_graph.h"
#include "periodic_system.h"
#include "potential_evaluator.h"
#include "potential_registry.h"
#include "resident_evaluator.h"

namespace {

using namespace otf;

int failures = 0;

void report(const std::string& what, double difference, double tolerance) {
  const bool ok = difference <= tolerance;
  failures += ok ? 0 : 1;
  std::printf("%-64s max difference %.3g (tolerance %.3g) %s\n", what.c_str(), difference, tolerance,
              ok ? "ok" : "MISS");
}

ModelSpec spec(const std::string& dtype) {
  ModelSpec s;
  s.elements = {"Si", "C"};
  s.cutoff = 4.0;
  s.dtype = dtype;
  s.seed = 5;
  s.committee_size = 3;
  s.hyperparameters = {{"hidden", {16, 16}}, {"radial_functions", 6}, {"angular_radial_functions", 3}};
  return s;
}

// A jittered two-element simple-cubic crystal of 4^3 atoms, spacing 2.3.
PeriodicConfiguration crystal() {
  PeriodicConfiguration config;
  const double a = 2.3;
  const int n = 4;
  config.cell = {{{n * a, 0.0, 0.0}, {0.0, n * a, 0.0}, {0.0, 0.0, n * a}}};
  torch::manual_seed(1);
  const torch::Tensor jitter = torch::rand({n * n * n, 3}, torch::kFloat64).sub(0.5).mul(0.3);
  int atom = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k, ++atom) {
        config.positions.push_back(i * a + jitter[atom][0].item<double>());
        config.positions.push_back(j * a + jitter[atom][1].item<double>());
        config.positions.push_back(k * a + jitter[atom][2].item<double>());
        config.species.push_back((i + j + k) % 2);
      }
  return config;
}

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu() - b.cpu()).abs().max().item<double>();
}

void evaluator_checks(const PeriodicSystem& system, const torch::Device& gpu) {
  const AtomicSystemView view = system.view();
  const int64_t atoms = view.num_atoms;
  for (const Precision precision : {Precision::Float32, Precision::BFloat16, Precision::Float16}) {
    const auto model = create_potential(spec("float32"));
    PotentialEvaluator host(model, {precision, 2048});
    std::vector<double> forces(static_cast<std::size_t>(3 * atoms), 0.0), virial(static_cast<std::size_t>(6 * atoms), 0.0);
    EvaluationOutputs out;
    out.forces = forces.data();
    out.atom_virial = virial.data();
    const EvaluationTotals expected = host.evaluate(view, out);
    const torch::Tensor cpu_forces = torch::from_blob(forces.data(), {atoms, 3}, torch::kFloat64).clone();
    const torch::Tensor cpu_virial = torch::from_blob(virial.data(), {atoms, 6}, torch::kFloat64).clone();
    const double scale = std::max(1.0, cpu_forces.abs().max().item<double>());
    const double tolerance = (precision == Precision::Float32 ? 1e-5 : 3e-2) * scale;

    // The model on the GPU, the system as CUDA Kokkos views would hold it.
    model->to(gpu);
    int widest = 1;
    for (int c = 0; c < view.num_centers; ++c) widest = std::max(widest, view.neighbor_counts[c]);
    torch::Tensor neighbors = torch::zeros({widest + 2, atoms + 5}, torch::kInt32).t();  // LayoutLeft
    torch::Tensor counts = torch::zeros({atoms + 5}, torch::kInt32);
    for (int c = 0; c < view.num_centers; ++c) {
      const int i = view.centers[c];
      counts[i] = view.neighbor_counts[c];
      for (int k = 0; k < view.neighbor_counts[c]; ++k) neighbors[i][k] = view.neighbors[c][k];
    }
    ResidentSystem resident;
    resident.num_atoms = atoms;
    resident.positions = torch::from_blob(const_cast<double*>(view.positions), {atoms, 3}, torch::kFloat64).to(gpu);
    std::vector<int> types(view.species, view.species + atoms);
    resident.types = torch::tensor(types, torch::kInt32).to(gpu);
    resident.species_of_type = torch::tensor(std::vector<int64_t>{0, 1}).to(gpu);
    resident.centers = torch::tensor(std::vector<int>(view.centers, view.centers + view.num_centers), torch::kInt32).to(gpu);
    resident.neighbor_counts = counts.to(gpu);
    resident.neighbors = neighbors.to(gpu).t().contiguous().t();  // column-major on the GPU too
    ResidentOutputs outputs;
    outputs.forces = torch::zeros({atoms + 5, 3}, torch::TensorOptions().dtype(torch::kFloat64).device(gpu));
    outputs.atom_virial = torch::zeros({atoms + 5, 6}, torch::TensorOptions().dtype(torch::kFloat64).device(gpu));
    ResidentEvaluator device_evaluator(model, {precision, 2048});
    const EvaluationTotals totals = device_evaluator.evaluate(resident, outputs);
    const std::string name = to_string(precision);
    report("resident evaluator on " + gpu.str() + ", " + name + ": forces", max_abs(outputs.forces.narrow(0, 0, atoms), cpu_forces), tolerance);
    report("resident evaluator on " + gpu.str() + ", " + name + ": per-atom virial",
           max_abs(outputs.atom_virial.narrow(0, 0, atoms), cpu_virial), 10 * tolerance);
    report("resident evaluator on " + gpu.str() + ", " + name + ": energy", std::abs(totals.energy - expected.energy),
           (precision == Precision::Float32 ? 1e-5 : 3e-2) * std::max(1.0, std::abs(expected.energy)));

    // Host arrays with the model on the GPU (what fix otf/train's pair evaluation meets).
    std::vector<double> forces_gpu_model(static_cast<std::size_t>(3 * atoms), 0.0);
    EvaluationOutputs out_gpu;
    out_gpu.forces = forces_gpu_model.data();
    PotentialEvaluator host_arrays(model, {precision, 2048});
    host_arrays.evaluate(view, out_gpu);
    report("host-array evaluator, model on " + gpu.str() + ", " + name + ": forces",
           max_abs(torch::from_blob(forces_gpu_model.data(), {atoms, 3}, torch::kFloat64), cpu_forces), tolerance);
  }
}

torch::Tensor trained_weights(const NeighborGraph& graph, const torch::Tensor& labels, const torch::Device& device) {
  const auto model = create_potential(spec("float32"));
  model->to(device);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  const NeighborGraph on_device = graph.to(device);
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    PredictionOptions options;
    options.create_graph = true;
    const Prediction p = predict(*model, on_device, options);
    const torch::Tensor loss = (p.forces.to(torch::kFloat64) - labels.to(device)).pow(2).mean();
    loss.backward();
    adam.step();
  }
  std::vector<torch::Tensor> flat;
  for (const auto& parameter : model->parameters()) flat.push_back(parameter.detach().cpu().reshape({-1}));
  return torch::cat(flat);
}

}  // namespace

int main() {
  if (!torch::cuda::is_available()) {
    std::printf("no CUDA device visible to LibTorch\n");
    return 1;
  }
  const torch::Device gpu(torch::kCUDA, 0);
  const PeriodicSystem system(crystal(), 4.5);
  evaluator_checks(system, gpu);

  const NeighborGraph graph = neighbor_graph_from_view(system.view(), 4.0);
  const torch::Tensor labels = torch::randn({graph.positions.size(0), 3}, torch::kFloat64).mul(0.1);
  const torch::Tensor cpu_weights = trained_weights(graph, labels, torch::kCPU);
  const torch::Tensor gpu_weights = trained_weights(graph, labels, gpu);
  report("training (force loss, double backward, Adam x3) on " + gpu.str() + ": weights", max_abs(gpu_weights, cpu_weights),
         1e-4);
  std::printf("%s\n", failures == 0 ? "all GPU checks passed" : "GPU checks MISSED");
  return failures == 0 ? 0 : 1;
}

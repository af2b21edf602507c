// Calls-to-accuracy of the Bayesian descriptor regression
// (potentials/bayesian_descriptor_regression.h) on the main example's task, offline: fit to the
// first n labelled frames of a training trajectory (one every 100 steps, as early labels of an
// on-the-fly run would come), then held-out force RMSE per component, energy RMSE per atom, the
// largest force error and the calibration of the predictive spread on each held-out set. The
// descriptor is examples/si-sw/si-spec.json's. Usage: bench_bayesian_learner TRAINING.dump
// HELDOUT.dump... (bench/bayesian_learner/run.sh).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bayesian_descriptor_regression.h"
#include "periodic_system.h"

namespace {

struct LabelledConfiguration {
  otf::PeriodicConfiguration configuration;
  double energy = 0.0;
  torch::Tensor forces;  // [atoms, 3]
  long step = 0;
};

// LAMMPS custom dumps "id type x y z fx fy fz c_peatom", orthogonal boxes, sorted by id.
std::vector<LabelledConfiguration> read_dump(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<LabelledConfiguration> frames;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ITEM: TIMESTEP", 0) != 0) continue;
    LabelledConfiguration frame;
    std::getline(in, line);
    frame.step = std::stol(line);
    std::getline(in, line);  // ITEM: NUMBER OF ATOMS
    std::getline(in, line);
    const int atoms = std::stoi(line);
    std::getline(in, line);  // ITEM: BOX BOUNDS
    double lo[3], hi[3];
    for (int d = 0; d < 3; ++d) {
      std::getline(in, line);
      std::istringstream(line) >> lo[d] >> hi[d];
    }
    std::getline(in, line);  // ITEM: ATOMS ...
    frame.configuration.cell = {
        {{hi[0] - lo[0], 0, 0}, {0, hi[1] - lo[1], 0}, {0, 0, hi[2] - lo[2]}}};
    std::vector<double> forces;
    for (int i = 0; i < atoms; ++i) {
      std::getline(in, line);
      std::istringstream fields(line);
      int id = 0, type = 0;
      double x, y, z, fx, fy, fz, pe;
      fields >> id >> type >> x >> y >> z >> fx >> fy >> fz >> pe;
      frame.configuration.positions.insert(frame.configuration.positions.end(),
                                           {x - lo[0], y - lo[1], z - lo[2]});
      frame.configuration.species.push_back(type - 1);
      forces.insert(forces.end(), {fx, fy, fz});
      frame.energy += pe;
    }
    frame.forces = torch::tensor(forces, torch::kFloat64).view({atoms, 3});
    frames.push_back(std::move(frame));
  }
  return frames;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bench_bayesian_learner TRAINING.dump HELDOUT.dump...\n";
    return 2;
  }
  torch::set_num_threads(1);
  const auto training = read_dump(argv[1]);
  std::vector<std::pair<std::string, std::vector<LabelledConfiguration>>> held_out;
  for (int a = 2; a < argc; ++a) held_out.emplace_back(argv[a], read_dump(argv[a]));

  otf::ThreeBodyDescriptorOptions descriptor;  // examples/si-sw/si-spec.json
  descriptor.num_species = 1;
  descriptor.cutoff = 4.0;
  descriptor.radial_functions = 8;
  descriptor.angular_radial_functions = 4;
  descriptor.max_angular_order = 3;

  // Training frames at steps 100, 200, ... of the trajectory.
  std::vector<const LabelledConfiguration*> labels;
  for (const auto& frame : training) {
    if (frame.step > 0 && frame.step % 100 == 0) labels.push_back(&frame);
  }
  std::printf("%-6s %-5s %-26s %8s %8s %8s %8s %8s %8s %8s %8s\n", "degree", "calls",
              "held-out set", "F_rmse", "E_rmse", "F_max", "out90%", "sigmaF", "fit_s", "pred_s",
              "mean_s");
  for (const int64_t degree : {1, 2}) {
    otf::BayesianRegressionOptions options;
    options.degree = degree;
    otf::BayesianDescriptorRegression model(descriptor, options);
    for (size_t calls = 1; calls <= std::min<size_t>(8, labels.size()); ++calls) {
      const auto fit_start = std::chrono::steady_clock::now();
      model.add_frame(labels[calls - 1]->configuration, labels[calls - 1]->energy,
                      labels[calls - 1]->forces);
      model.fit();
      const double fit_seconds = seconds_since(fit_start);
      if (calls != 1 && calls != 2 && calls != 3 && calls != 4 && calls != 6 && calls != 8)
        continue;
      for (const auto& [name, frames] : held_out) {
        double force_squares = 0, energy_squares = 0, largest = 0;
        long outside = 0, components = 0;
        const auto predict_start = std::chrono::steady_clock::now();
        for (const auto& frame : frames) {
          const otf::RegressionPrediction prediction = model.predict(frame.configuration);
          const torch::Tensor error = prediction.forces - frame.forces;
          const torch::Tensor spread =
              (prediction.force_std.pow(2) + std::pow(model.force_noise(), 2)).sqrt();
          force_squares += error.pow(2).sum().item<double>();
          largest = std::max(largest, error.abs().max().item<double>());
          outside += error.abs().gt(1.645 * spread).sum().item<long>();
          components += error.numel();
          const double per_atom = (prediction.energy - frame.energy) / frame.forces.size(0);
          energy_squares += per_atom * per_atom;
        }
        const double predict_seconds =
            seconds_since(predict_start) / static_cast<double>(frames.size());
        const auto mean_start = std::chrono::steady_clock::now();
        for (const auto& frame : frames) (void)model.mean_energy_and_forces(frame.configuration);
        const double mean_seconds = seconds_since(mean_start) / static_cast<double>(frames.size());
        const std::string set = name.substr(name.find_last_of('/') + 1);
        std::printf("%-6ld %-5zu %-26s %8.4f %8.3f %8.3f %8.3f %8.4f %8.2f %8.3f %8.4f\n",
                    static_cast<long>(degree), calls, set.c_str(),
                    std::sqrt(force_squares / components),
                    1000.0 * std::sqrt(energy_squares / frames.size()), largest,
                    static_cast<double>(outside) / components, model.force_noise(), fit_seconds,
                    predict_seconds, mean_seconds);
      }
    }
  }
  std::printf(
      "F_rmse eV/A per component, E_rmse meV/atom, F_max eV/A, out90%%: fraction of force "
      "components "
      "outside the predicted 90%% interval, sigmaF: fitted force noise eV/A, fit_s: describe + fit "
      "of "
      "the last label, pred_s: prediction with uncertainty per held-out frame, mean_s: the "
      "posterior mean's energy "
      "and forces alone per frame (1 thread)\n");
  return 0;
}

// Calls-to-accuracy of the Bayesian descriptor regression
// (potentials/bayesian_descriptor_regression.h) on the main example's task, offline: fit to the
// first n labelled frames of a training trajectory (one every 100 steps, as early labels of an
// on-the-fly run would come), then held-out force RMSE per component, energy RMSE per atom, the
// largest force error and the calibration of the predictive spread on each held-out set. The
// descriptor is examples/si-sw/si-spec.json's unless options say otherwise.
// Usage: bench_bayesian_learner [options] TRAINING.dump HELDOUT.dump... (bench/bayesian_learner/run.sh)
//   --species N --cutoff R --radial N --angular N --order L   the descriptor (three_body_descriptor.h)
//   --degrees 1,2      the bases to fit       --label-every S  a label every S steps (100)
//   --counts 1,2,3,4,6,8   after which label counts to evaluate (the largest is the last label)
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

std::vector<long> comma_list(const std::string& text) {
  std::vector<long> values;
  std::istringstream fields(text);
  for (std::string field; std::getline(fields, field, ',');) values.push_back(std::stol(field));
  return values;
}

int run(int argc, char** argv) {
  otf::ThreeBodyDescriptorOptions descriptor;  // examples/si-sw/si-spec.json
  descriptor.num_species = 1;
  descriptor.cutoff = 4.0;
  descriptor.radial_functions = 8;
  descriptor.angular_radial_functions = 4;
  descriptor.max_angular_order = 3;
  std::vector<long> degrees{1, 2}, counts{1, 2, 3, 4, 6, 8};
  long label_every = 100;
  std::vector<std::string> files;
  for (int a = 1; a < argc; ++a) {
    const std::string option = argv[a];
    if (option.rfind("--", 0) != 0) {
      files.push_back(option);
      continue;
    }
    if (a + 1 >= argc) {
      std::cerr << "bench_bayesian_learner: " << option << " needs a value\n";
      return 2;
    }
    const std::string value = argv[++a];
    try {
      if (option == "--species") descriptor.num_species = std::stol(value);
      else if (option == "--cutoff") descriptor.cutoff = std::stod(value);
      else if (option == "--radial") descriptor.radial_functions = std::stol(value);
      else if (option == "--angular") descriptor.angular_radial_functions = std::stol(value);
      else if (option == "--order") descriptor.max_angular_order = std::stol(value);
      else if (option == "--degrees") degrees = comma_list(value);
      else if (option == "--counts") counts = comma_list(value);
      else if (option == "--label-every") label_every = std::stol(value);
      else {
        std::cerr << "bench_bayesian_learner: unknown option " << option
                  << " (accepted: --species --cutoff --radial --angular --order --degrees --counts "
                     "--label-every)\n";
        return 2;
      }
    } catch (const std::logic_error&) {  // std::stol / std::stod: not a number, or out of range
      std::cerr << "bench_bayesian_learner: " << option << " " << value << ": not a number\n";
      return 2;
    }
  }
  const auto below_one = [](long value) { return value < 1; };
  if (files.size() < 2 || counts.empty() || label_every < 1 ||
      std::any_of(counts.begin(), counts.end(), below_one) ||
      std::any_of(degrees.begin(), degrees.end(), [](long d) { return d != 1 && d != 2; })) {
    std::cerr << "usage: bench_bayesian_learner [options] TRAINING.dump HELDOUT.dump... "
                 "(--counts and --label-every at least 1, --degrees 1 and/or 2)\n";
    return 2;
  }
  torch::set_num_threads(1);
  const auto training = read_dump(files[0]);
  std::vector<std::pair<std::string, std::vector<LabelledConfiguration>>> held_out;
  for (std::size_t f = 1; f < files.size(); ++f) held_out.emplace_back(files[f], read_dump(files[f]));

  // Training frames at steps S, 2S, ... of the trajectory.
  std::vector<const LabelledConfiguration*> labels;
  for (const auto& frame : training) {
    if (frame.step > 0 && frame.step % label_every == 0) labels.push_back(&frame);
  }
  const std::size_t last_count = static_cast<std::size_t>(*std::max_element(counts.begin(), counts.end()));
  std::printf("%-6s %-5s %-26s %8s %8s %8s %8s %8s %8s %8s %8s\n", "degree", "calls",
              "held-out set", "F_rmse", "E_rmse", "F_max", "out90%", "sigmaF", "fit_s", "pred_s",
              "mean_s");
  for (const long degree : degrees) {
    otf::BayesianRegressionOptions options;
    options.degree = degree;
    otf::BayesianDescriptorRegression model(descriptor, options);
    for (size_t calls = 1; calls <= std::min(last_count, labels.size()); ++calls) {
      const auto fit_start = std::chrono::steady_clock::now();
      model.add_frame(labels[calls - 1]->configuration, labels[calls - 1]->energy,
                      labels[calls - 1]->forces);
      model.fit();
      const double fit_seconds = seconds_since(fit_start);
      if (std::find(counts.begin(), counts.end(), static_cast<long>(calls)) == counts.end()) continue;
      for (const auto& [name, frames] : held_out) {
        double force_squares = 0, energy_squares = 0, largest = 0, energy_bias = 0,
               energy_std_squares = 0;
        long outside = 0, components = 0;
        std::vector<double> species_squares(static_cast<std::size_t>(descriptor.num_species), 0.0);
        std::vector<long> species_components(species_squares.size(), 0);
        const auto predict_start = std::chrono::steady_clock::now();
        for (const auto& frame : frames) {
          const otf::RegressionPrediction prediction = model.predict(frame.configuration);
          const torch::Tensor error = prediction.forces - frame.forces;
          const torch::Tensor spread =
              (prediction.force_std.pow(2) + std::pow(model.force_noise(), 2)).sqrt();
          force_squares += error.pow(2).sum().item<double>();
          const auto& species = frame.configuration.species;
          const torch::Tensor atom_squares = error.pow(2).sum(1);
          for (std::size_t atom = 0; atom < species.size(); ++atom) {
            species_squares[static_cast<std::size_t>(species[atom])] +=
                atom_squares[static_cast<int64_t>(atom)].item<double>();
            species_components[static_cast<std::size_t>(species[atom])] += 3;
          }
          largest = std::max(largest, error.abs().max().item<double>());
          outside += error.abs().gt(1.645 * spread).sum().item<long>();
          components += error.numel();
          const double per_atom = (prediction.energy - frame.energy) / frame.forces.size(0);
          energy_squares += per_atom * per_atom;
          energy_bias += per_atom;
          const double std_per_atom = prediction.energy_std / frame.forces.size(0);
          energy_std_squares += std_per_atom * std_per_atom;
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
        std::printf("%-6s %-5s   energy per atom: mean error %.3f meV, posterior std %.3f meV, "
                    "fitted noise %.3f meV\n",
                    "", "", 1000.0 * energy_bias / frames.size(),
                    1000.0 * std::sqrt(energy_std_squares / frames.size()),
                    1000.0 * model.energy_noise());
        if (species_squares.size() > 1) {
          std::printf("%-6s %-5s   F_rmse per species:", "", "");
          for (std::size_t k = 0; k < species_squares.size(); ++k)
            std::printf(" %zu: %.4f", k + 1,
                        std::sqrt(species_squares[k] / std::max(species_components[k], 1L)));
          std::printf("\n");
        }
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

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // unreadable dumps, descriptor options out of range
    std::cerr << "bench_bayesian_learner: " << e.what() << "\n";
    return 1;
  }
}

// Cost of evaluating the default potential (energy + forces + virial, as pair_style otf asks for
// every MD step) per atom, for crystalline Si of 512 to 32768 atoms, in float32, bfloat16 and
// emulated float16. Printed per atom-step and as ratios measured in the same run: each precision
// against float32 at the same size, and each size against the smallest (linear scaling means a
// per-atom ratio near 1).
//
// Usage: bench_model_evaluation [--cells 4,8,12,16] [--repeats R] [--threads T] [--cutoff A]
//                               [--chunk C] [--committee M] [--hidden 64,64] [--out file.tsv]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "neighbor_graph.h"
#include "periodic_system.h"
#include "potential_evaluator.h"
#include "potential_registry.h"

#include "bench_timing.h"

namespace {

struct Options {
  std::vector<int> cells{4, 8, 12, 16};
  int repeats = 5;
  int threads = 1;
  double cutoff = 5.0;
  int64_t chunk = 2048;
  int64_t committee = 4;
  std::vector<int64_t> hidden{64, 64};
  std::string out;
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--cells") {
      options.cells.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) options.cells.push_back(std::stoi(item));
    } else if (key == "--repeats") {
      options.repeats = std::stoi(value);
    } else if (key == "--threads") {
      options.threads = std::stoi(value);
    } else if (key == "--cutoff") {
      options.cutoff = std::stod(value);
    } else if (key == "--chunk") {
      options.chunk = std::stoll(value);
    } else if (key == "--committee") {
      options.committee = std::stoll(value);
    } else if (key == "--hidden") {
      options.hidden.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) options.hidden.push_back(std::stoll(item));
    } else if (key == "--out") {
      options.out = value;
    } else {
      std::fprintf(stderr, "unknown option %s (expected --cells, --repeats, --threads, --cutoff, --chunk, --committee, --hidden, --out)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  return options;
}

using otf::bench::median;

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  torch::set_num_threads(options.threads);
  otf::ModelSpec spec;
  spec.elements = {"Si"};
  spec.cutoff = options.cutoff;
  spec.committee_size = options.committee;
  spec.hyperparameters = {{"hidden", options.hidden}};
  const auto model = otf::create_potential(spec);
  {
    // Realistic input scales: statistics from a small thermalised crystal.
    const otf::PeriodicSystem sample(otf::diamond_crystal(3, 5.431, 0.1, 1), spec.cutoff);
    const otf::NeighborGraph graph = otf::neighbor_graph_from_view(sample.view(), spec.cutoff);
    model->accumulate_descriptor_statistics(model->descriptor_moments(
        otf::local_environments(graph, model->num_species(), spec.cutoff, model->dtype())));
  }
  std::printf("# default model (%s), cutoff %.2f A, committee %lld, %d thread(s), chunk %lld\n",
              model->spec().hyperparameters.dump().c_str(), spec.cutoff,
              static_cast<long long>(spec.committee_size), options.threads,
              static_cast<long long>(options.chunk));
  std::printf("%-8s %-9s %10s %12s %14s %12s %12s\n", "atoms", "precision", "neighbours",
              "ms/step", "us/atom-step", "vs_float32", "per_atom_vs_smallest");
  std::ofstream tsv;
  if (!options.out.empty()) {
    tsv.open(options.out);
    tsv << "atoms\tprecision\tneighbours\tms_per_step\tus_per_atom_step\tratio_to_float32\tper_atom_ratio_to_smallest\n";
  }
  std::vector<double> smallest_per_atom(3, 0.0);
  const otf::Precision precisions[3] = {otf::Precision::Float32, otf::Precision::BFloat16,
                                        otf::Precision::Float16};
  for (int n : options.cells) {
    const otf::PeriodicSystem system(otf::diamond_crystal(n, 5.431, 0.05, 2), spec.cutoff + 0.3);
    const otf::AtomicSystemView view = system.view();
    std::vector<double> forces(3 * static_cast<std::size_t>(view.num_atoms));
    std::vector<double> per_precision(3);
    // Interleave precisions repeat by repeat, so drifts in machine speed hit all alike.
    std::vector<std::vector<double>> times(3);
    std::vector<std::unique_ptr<otf::PotentialEvaluator>> evaluators;
    for (auto precision : precisions) {
      evaluators.push_back(std::make_unique<otf::PotentialEvaluator>(
          model, otf::EvaluatorOptions{precision, options.chunk}));
    }
    double neighbours = 0.0;
    for (int r = 0; r < options.repeats + 1; ++r) {
      for (int p = 0; p < 3; ++p) {
        std::fill(forces.begin(), forces.end(), 0.0);
        otf::EvaluationOutputs outputs;
        outputs.forces = forces.data();
        const auto start = std::chrono::steady_clock::now();
        const otf::EvaluationTotals totals = evaluators[static_cast<std::size_t>(p)]->evaluate(view, outputs);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        neighbours = static_cast<double>(totals.pairs_within_cutoff) / view.num_local;
        if (r > 0) times[static_cast<std::size_t>(p)].push_back(ms);  // the first call warms up
      }
    }
    for (int p = 0; p < 3; ++p) per_precision[static_cast<std::size_t>(p)] = median(times[static_cast<std::size_t>(p)]);
    for (int p = 0; p < 3; ++p) {
      const double ms = per_precision[static_cast<std::size_t>(p)];
      const double us_per_atom = 1000.0 * ms / view.num_local;
      if (smallest_per_atom[static_cast<std::size_t>(p)] == 0.0) smallest_per_atom[static_cast<std::size_t>(p)] = us_per_atom;
      const double vs_float32 = per_precision[0] / ms;  // > 1: faster than float32
      const double scaling = us_per_atom / smallest_per_atom[static_cast<std::size_t>(p)];
      const std::string name = otf::to_string(precisions[p]);
      std::printf("%-8d %-9s %10.1f %12.2f %14.2f %12.3f %12.3f\n", view.num_local, name.c_str(),
                  neighbours, ms, us_per_atom, vs_float32, scaling);
      if (tsv) {
        tsv << view.num_local << '\t' << name << '\t' << neighbours << '\t' << ms << '\t' << us_per_atom
            << '\t' << vs_float32 << '\t' << scaling << '\n';
      }
    }
  }
  return 0;
}

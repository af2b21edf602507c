// Shared pieces of the model tests: small specs, random periodic two-element configurations
// (orthogonal or triclinic), energies and forces of a configuration through the evaluator, and a
// dtype copy of a model. Header-only.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model_spec.h"
#include "neighbor_graph.h"
#include "periodic_system.h"
#include "potential.h"
#include "potential_evaluator.h"
#include "potential_registry.h"
#include "radial_basis.h"

namespace otf::testing {

inline ModelSpec small_spec(std::vector<std::string> elements, const std::string& dtype,
                            double cutoff = 4.0, uint64_t seed = 7) {
  ModelSpec spec;
  spec.elements = std::move(elements);
  spec.cutoff = cutoff;
  spec.dtype = dtype;
  spec.seed = seed;
  spec.committee_size = 3;
  spec.hyperparameters = {{"hidden", {16, 16}}, {"radial_functions", 6},
                          {"angular_radial_functions", 3}};
  return spec;
}

// Random atoms at least `min_distance` apart in a (possibly triclinic) cell of about
// `density` atoms per cubic length unit; species alternate between 0 and species-1.
inline PeriodicConfiguration random_configuration(int atoms, int species, bool triclinic,
                                                  uint64_t seed, double density = 0.05,
                                                  double min_distance = 1.8) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double side = std::cbrt(atoms / density);
  PeriodicConfiguration config;
  config.cell = {{{side, 0.0, 0.0}, {0.0, side * 1.1, 0.0}, {0.0, 0.0, side * 0.9}}};
  if (triclinic) {
    config.cell[1][0] = 0.3 * side;
    config.cell[2][0] = -0.2 * side;
    config.cell[2][1] = 0.25 * side;
  }
  while (config.num_atoms() < atoms) {
    const double f[3] = {unit(rng), unit(rng), unit(rng)};
    double p[3] = {0, 0, 0};
    for (int d = 0; d < 3; ++d) {
      for (int v = 0; v < 3; ++v) p[d] += f[v] * config.cell[static_cast<std::size_t>(v)][static_cast<std::size_t>(d)];
    }
    // Minimum-image distance check in fractional space (enough for a dense random fill).
    bool too_close = false;
    for (int i = 0; i < config.num_atoms() && !too_close; ++i) {
      for (int a = -1; a <= 1 && !too_close; ++a) {
        for (int b = -1; b <= 1 && !too_close; ++b) {
          for (int c = -1; c <= 1 && !too_close; ++c) {
            double d2 = 0.0;
            for (int d = 0; d < 3; ++d) {
              const double image = config.positions[static_cast<std::size_t>(3 * i + d)] + a * config.cell[0][static_cast<std::size_t>(d)] +
                                   b * config.cell[1][static_cast<std::size_t>(d)] + c * config.cell[2][static_cast<std::size_t>(d)];
              d2 += (p[d] - image) * (p[d] - image);
            }
            too_close = d2 < min_distance * min_distance;
          }
        }
      }
    }
    if (too_close) continue;
    config.positions.insert(config.positions.end(), p, p + 3);
    config.species.push_back(config.num_atoms() % species);
  }
  return config;
}

struct EnergyForcesVirial {
  double energy = 0.0;
  std::vector<double> forces;   // owned atoms [atoms][3]
  std::array<double, 6> virial{};
  std::vector<double> atom_energy;   // owned atoms
  std::vector<double> atom_virial;   // owned atoms [atoms][6], ghosts folded
};

inline EnergyForcesVirial evaluate_configuration(PotentialEvaluator& evaluator,
                                                 const PeriodicConfiguration& config) {
  const PeriodicSystem system(config, evaluator.potential().cutoff() + 0.5);
  const AtomicSystemView view = system.view();
  const auto atoms = static_cast<std::size_t>(view.num_atoms);
  std::vector<double> forces(3 * atoms, 0.0), atom_energy(atoms, 0.0), atom_virial(6 * atoms, 0.0);
  EvaluationOutputs outputs;
  outputs.forces = forces.data();
  outputs.atom_energy = atom_energy.data();
  outputs.atom_virial = atom_virial.data();
  const EvaluationTotals totals = evaluator.evaluate(view, outputs);
  EnergyForcesVirial result;
  result.energy = totals.energy;
  result.virial = totals.virial;
  result.forces = system.fold_onto_owners(forces);
  result.atom_energy.assign(atom_energy.begin(), atom_energy.begin() + view.num_local);
  result.atom_virial.assign(static_cast<std::size_t>(6 * view.num_local), 0.0);
  for (std::size_t i = 0; i < atoms; ++i) {
    const auto owner = static_cast<std::size_t>(system.owner()[i]);
    for (std::size_t a = 0; a < 6; ++a) result.atom_virial[6 * owner + a] += atom_virial[6 * i + a];
  }
  return result;
}

// The same model with parameters and buffers in another dtype (float64 buffers stay float64).
inline std::shared_ptr<Potential> with_dtype(const Potential& potential, const std::string& dtype) {
  ModelSpec spec = potential.spec();
  spec.dtype = dtype;
  std::shared_ptr<Potential> copy = create_potential(spec);
  torch::NoGradGuard no_grad;
  const auto source_parameters = potential.named_parameters(true);
  for (auto& item : copy->named_parameters(true)) {
    item.value().copy_(source_parameters[item.key()]);
  }
  const auto source_buffers = potential.named_buffers(true);
  for (auto& item : copy->named_buffers(true)) item.value().copy_(source_buffers[item.key()]);
  return copy;
}

// Descriptor statistics and energy shifts from the configurations themselves, so the networks
// see standardised inputs as after the first labelled frames of a run.
inline void fit_statistics(Potential& potential, const std::vector<PeriodicConfiguration>& configs) {
  for (const PeriodicConfiguration& config : configs) {
    const PeriodicSystem system(config, potential.cutoff());
    const NeighborGraph graph = neighbor_graph_from_view(system.view(), potential.cutoff());
    potential.accumulate_descriptor_statistics(potential.descriptor_moments(
        local_environments(graph, potential.num_species(), potential.cutoff(), potential.dtype())));
  }
}

// A smooth Morse pair potential (D = 1 eV, a = 1.5 /A, r0 = 2.4 A, times the cutoff function) as
// reference labels: the energy of the graph's centres and the forces on every atom of the graph
// (ghost entries not folded).
struct MorseLabels {
  double energy;
  torch::Tensor forces;  // [atoms, 3] float64
};
inline MorseLabels morse_labels(const NeighborGraph& graph, double cutoff) {
  NeighborGraph copy = graph;
  copy.positions = graph.positions.detach().to(torch::kFloat64).requires_grad_(true);
  const LocalEnvironments env = local_environments(copy, 1, cutoff, torch::kFloat64);
  const torch::Tensor r = (env.pair_vectors * env.pair_vectors).sum(-1).sqrt();
  const torch::Tensor e = torch::exp(-1.5 * (r - 2.4));
  const torch::Tensor energy = 0.5 * ((e * e - 2.0 * e) * smooth_cutoff(r, cutoff)).sum();
  const torch::Tensor forces = -torch::autograd::grad({energy}, {copy.positions})[0];
  return {energy.item<double>(), forces.detach()};
}

}  // namespace otf::testing

#include "configuration_evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "committee_deviation.h"
#include "periodic_system.h"

namespace otf {
namespace {

void check_configuration(const Configuration& configuration, int64_t num_species) {
  const int atoms = configuration.num_atoms();
  if (configuration.positions.size() != 3 * configuration.species.size())
    throw std::invalid_argument("positions hold " + std::to_string(configuration.positions.size()) +
                                " numbers for " + std::to_string(atoms) +
                                " atoms (expected 3 per atom)");
  for (int i = 0; i < atoms; ++i) {
    const int s = configuration.species[i];
    if (s < 0 || s >= num_species)
      throw std::invalid_argument("atom " + std::to_string(i) + " has species index " +
                                  std::to_string(s) + "; the model has " +
                                  std::to_string(num_species) + " species");
    for (int k = 0; k < 3; ++k)
      if (!std::isfinite(configuration.positions[3 * i + k]))
        throw std::invalid_argument("atom " + std::to_string(i) + " has a non-finite position");
  }
  if (configuration.cell)
    for (const auto& row : *configuration.cell)
      for (double x : row)
        if (!std::isfinite(x)) throw std::invalid_argument("the cell has a non-finite entry");
}

// A configuration without periodicity, as the periodic one of an orthogonal box that leaves more
// than the cutoff of vacuum on every side: every image is then farther than the cutoff from every
// atom, so PeriodicSystem makes no ghost and its neighbour list is the free cluster's.
PeriodicConfiguration isolated_in_a_box(const Configuration& configuration, double cutoff) {
  std::array<double, 3> lower{}, upper{};
  lower.fill(std::numeric_limits<double>::max());
  upper.fill(std::numeric_limits<double>::lowest());
  for (int i = 0; i < configuration.num_atoms(); ++i)
    for (int k = 0; k < 3; ++k) {
      lower[k] = std::min(lower[k], configuration.positions[3 * i + k]);
      upper[k] = std::max(upper[k], configuration.positions[3 * i + k]);
    }
  const double margin = 1.5 * cutoff + 1.0;
  PeriodicConfiguration periodic;
  periodic.species = configuration.species;
  periodic.positions.resize(configuration.positions.size());
  for (int k = 0; k < 3; ++k) periodic.cell[k][k] = upper[k] - lower[k] + 2.0 * margin;
  for (int i = 0; i < configuration.num_atoms(); ++i)
    for (int k = 0; k < 3; ++k)
      periodic.positions[3 * i + k] = configuration.positions[3 * i + k] - lower[k] + margin;
  return periodic;
}

}  // namespace

ConfigurationEvaluator::ConfigurationEvaluator(std::shared_ptr<Potential> potential,
                                               EvaluatorOptions options)
    : evaluator_(std::move(potential), options) {}

ConfigurationResults ConfigurationEvaluator::evaluate(const Configuration& configuration,
                                                      bool force_uncertainty) {
  Potential& model = evaluator_.potential();
  check_configuration(configuration, model.num_species());
  const int atoms = configuration.num_atoms();
  ConfigurationResults results;
  results.forces.assign(3 * static_cast<size_t>(atoms), 0.0);
  results.atom_energies.assign(atoms, 0.0);
  results.atom_virials.assign(6 * static_cast<size_t>(atoms), 0.0);
  results.energy_uncertainties.assign(atoms, 0.0);
  if (atoms == 0) return results;

  PeriodicConfiguration periodic;
  if (configuration.cell) {
    periodic.cell = *configuration.cell;
    periodic.positions = configuration.positions;
    periodic.species = configuration.species;
  } else {
    periodic = isolated_in_a_box(configuration, model.cutoff());
  }
  const PeriodicSystem system(periodic, model.cutoff());
  const int all_atoms = system.num_atoms();  // owned atoms, then ghost images

  std::vector<double> forces(3 * static_cast<size_t>(all_atoms), 0.0);
  std::vector<double> atom_energy(all_atoms, 0.0);
  std::vector<double> atom_virial(6 * static_cast<size_t>(all_atoms), 0.0);
  std::vector<double> energy_uncertainty(all_atoms, 0.0);
  const int64_t members = model.committee_size();
  std::vector<double> member_forces;
  EvaluationOutputs outputs;
  outputs.forces = forces.data();
  outputs.atom_energy = atom_energy.data();
  outputs.atom_virial = atom_virial.data();
  outputs.atom_energy_uncertainty = energy_uncertainty.data();
  if (force_uncertainty) {
    member_forces.assign(static_cast<size_t>(members) * 3 * all_atoms, 0.0);
    outputs.member_forces = member_forces.data();
  }
  const EvaluationTotals totals = evaluator_.evaluate(system.view(), outputs);
  results.energy = totals.energy;
  results.virial = totals.virial;

  // Ghosts carry forces and half-pair virials of their owners' interactions: fold them back, as
  // LAMMPS' reverse communication does. Energies and uncertainties are only filled for centres,
  // which are the owned atoms.
  const std::vector<int>& owner = system.owner();
  for (int i = 0; i < all_atoms; ++i) {
    const int o = owner[i];
    for (int k = 0; k < 3; ++k) results.forces[3 * o + k] += forces[3 * i + k];
    for (int k = 0; k < 6; ++k) results.atom_virials[6 * o + k] += atom_virial[6 * i + k];
  }
  std::copy(atom_energy.begin(), atom_energy.begin() + atoms, results.atom_energies.begin());
  std::copy(energy_uncertainty.begin(), energy_uncertainty.begin() + atoms,
            results.energy_uncertainties.begin());

  if (force_uncertainty) {
    auto folded = torch::zeros({members, atoms, 3}, torch::kFloat64);
    auto all = torch::from_blob(member_forces.data(), {members, all_atoms, 3}, torch::kFloat64);
    auto owners = torch::tensor(owner, torch::kInt64);
    folded.index_add_(1, owners, all);
    // With the noise of the model's fit (Potential::force_noise), as fix otf/train reports it.
    const double noise = evaluator_.potential().force_noise();
    const auto deviation =
        (committee_vector_deviation(folded).square() + 3.0 * noise * noise).sqrt().contiguous();
    results.force_uncertainties.assign(deviation.data_ptr<double>(),
                                       deviation.data_ptr<double>() + atoms);
  }
  return results;
}

}  // namespace otf

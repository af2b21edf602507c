// A model evaluated on one whole configuration, as a Python user or a property check sees it:
// positions, species and a cell (periodic in all three directions) or none (a molecule or a
// cluster), in; energy, forces, virial, per-atom energies and virials and the committee's
// uncertainties out. Builds the ghost images and neighbour list an MD code would provide.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "potential.h"
#include "potential_evaluator.h"

namespace otf {

struct Configuration {
  std::vector<double> positions;  // [atoms][3], the model's length unit
  std::vector<int> species;       // [atoms], model species indices
  // Rows a, b, c of a cell periodic in all three directions; nullopt: no periodicity.
  std::optional<std::array<std::array<double, 3>, 3>> cell;
  int num_atoms() const { return static_cast<int>(species.size()); }
};

struct ConfigurationResults {
  double energy = 0.0;
  std::array<double, 6> virial{};            // sum_i r_i f_i: xx yy zz xy xz yz
  std::vector<double> forces;                // [atoms][3]
  std::vector<double> atom_energies;         // [atoms]
  std::vector<double> atom_virials;          // [atoms][6], sums to `virial`
  std::vector<double> energy_uncertainties;  // [atoms]: members' spread of the atomic energy
  // [atoms]: sqrt(mean_k |F_k - mean F|^2) over members (committee_deviation.h); empty unless
  // asked for (one more backward pass per member).
  std::vector<double> force_uncertainties;
};

class ConfigurationEvaluator {
 public:
  // Throws std::invalid_argument for options the potential cannot run (check_evaluator_options).
  ConfigurationEvaluator(std::shared_ptr<Potential> potential, EvaluatorOptions options);

  // Throws std::invalid_argument naming the problem: array sizes, a species index out of range,
  // a non-finite position, a degenerate cell.
  ConfigurationResults evaluate(const Configuration& configuration, bool force_uncertainty);

  Potential& potential() { return evaluator_.potential(); }
  const EvaluatorOptions& options() const { return evaluator_.options(); }

 private:
  PotentialEvaluator evaluator_;
};

}  // namespace otf

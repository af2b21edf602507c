// Inference for MD on arrays that stay where the MD code keeps them: positions, types and the
// neighbour list arrive as tensors (from_blob over a Kokkos view, on the host or on a GPU, in any
// strides), every step of the evaluation is a tensor operation on their device, and forces,
// per-atom energies and virials are added into the caller's output tensors in place. Nothing is
// copied to the host but the totals (one small transfer per call). Same results as
// PotentialEvaluator up to the order of floating-point sums.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "atomic_system.h"
#include "potential.h"
#include "potential_evaluator.h"

namespace otf {

// The system, as tensors on one device (the model's), borrowed for one call. Row counts may
// exceed the atom counts (Kokkos views are allocated with headroom).
struct ResidentSystem {
  int64_t num_atoms = 0;         // owned + ghost atoms
  torch::Tensor positions;       // [>= num_atoms, 3] float64
  torch::Tensor types;           // [>= num_atoms] integer: the MD code's atom types
  // [max type + 1] int64: the model species of each type, negative for types it ignores.
  torch::Tensor species_of_type;
  torch::Tensor centers;         // [centres] integer: atom indices
  // Full neighbour lists, one row per atom index (LAMMPS' Kokkos list: rows by atom, any layout):
  // centre i has neighbor_counts[i] neighbours neighbors[i][0..).
  torch::Tensor neighbor_counts;  // [>= num_atoms] integer
  torch::Tensor neighbors;        // [>= num_atoms, max neighbours] integer
  int64_t neighbor_index_mask = ~int64_t{0};  // applied to every neighbour index
};

// Where results go, on the same device; undefined tensors are not computed. Added to in place.
struct ResidentOutputs {
  torch::Tensor forces;                   // [>= num_atoms, 3] float64
  torch::Tensor atom_energy;              // [>= num_atoms] float64
  torch::Tensor atom_virial;              // [>= num_atoms, 6] float64, xx yy zz xy xz yz
  torch::Tensor atom_energy_uncertainty;  // [>= num_atoms] float64
};

class ResidentEvaluator {
 public:
  // Throws std::invalid_argument as PotentialEvaluator does.
  ResidentEvaluator(std::shared_ptr<Potential> potential, EvaluatorOptions options);

  // Adds the results to `outputs` and returns the totals (on the host). Throws
  // std::invalid_argument for tensors on another device than the model's, wrong shapes, and
  // neighbour or type indices out of range.
  EvaluationTotals evaluate(const ResidentSystem& system, const ResidentOutputs& outputs);

  Potential& potential() { return *potential_; }
  const EvaluatorOptions& options() const { return options_; }

 private:
  // Adds one chunk's results; returns [energy, virial xx..yz, max uncertainty, pairs] on the
  // device, summed by the caller so that the host waits once per call.
  torch::Tensor evaluate_chunk(const ResidentSystem& system, const torch::Tensor& species,
                               const torch::Tensor& centers, const ResidentOutputs& outputs);

  std::shared_ptr<Potential> potential_;
  EvaluatorOptions options_;
};

}  // namespace otf

// Fast inference for MD: energies, forces and virials of a Potential for an AtomicSystemView,
// evaluated in chunks of centre atoms so that memory stays bounded whatever the system size, with
// buffers reused from call to call (no allocation growth at constant size). Lower precisions run
// the model's forward inside an AutocastRegion; the force backward runs outside it
// (docs/design.md §7.7).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "atomic_system.h"
#include "potential.h"
#include "precision.h"

namespace otf {

struct EvaluatorOptions {
  Precision precision = Precision::Float32;
  // Centres per chunk: bounds the autograd graph's memory.
  int64_t chunk_size = 2048;
};

// Throws std::invalid_argument for a missing potential, a chunk size < 1, or a float64 model with
// a lower precision (every evaluator's options).
void check_evaluator_options(const Potential* potential, const EvaluatorOptions& options);

class PotentialEvaluator {
 public:
  // Throws std::invalid_argument for a chunk size < 1, or a float64 model with a lower precision.
  PotentialEvaluator(std::shared_ptr<Potential> potential, EvaluatorOptions options);

  // Adds the results to `outputs` and returns the totals. Throws std::invalid_argument for an
  // inconsistent view (index out of range, species out of range).
  EvaluationTotals evaluate(const AtomicSystemView& system, const EvaluationOutputs& outputs);

  Potential& potential() { return *potential_; }
  const EvaluatorOptions& options() const { return options_; }
  // Bytes held by the reusable buffers (constant from call to call at constant system size).
  std::size_t workspace_bytes() const;

 private:
  void fill_chunk(const AtomicSystemView& system, int first_center, int count);
  EvaluationTotals evaluate_chunk(const AtomicSystemView& system, const EvaluationOutputs& outputs,
                                  int first_center, int count);

  std::shared_ptr<Potential> potential_;
  EvaluatorOptions options_;
  // Chunk workspace: capacity grows, never shrinks.
  int chunk_centers_ = 0;
  int chunk_max_neighbors_ = 0;
  std::vector<double> pair_vectors_double_;
  std::vector<float> pair_vectors_float_;
  std::vector<int64_t> neighbor_species_;
  std::vector<int64_t> center_species_;
  std::vector<int> center_atom_;
  std::vector<int> neighbor_atom_;
  std::vector<int> neighbor_counts_;
};

}  // namespace otf

/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: the model a LAMMPS style evaluates (loaded weights, the
   inference evaluator and its options) behind a header free of LibTorch, so
   that LAMMPS styles compile without torch headers. Every function throws
   std::exception with a message meant for the user; the styles turn it into
   a LAMMPS error.
------------------------------------------------------------------------- */

#ifndef OTF_MODEL_SESSION_H
#define OTF_MODEL_SESSION_H

#include "atomic_system.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace otf {

class Potential;

// The canonical name ("float32", "bfloat16", "float16") of a precision keyword, parsed by the
// engine's one parser (src/precision.h); throws std::invalid_argument listing accepted values.
std::string canonical_precision_name(const std::string &text);

// The bytes of a model file for `path`: a model file as it is, or a JSON spec file (starting
// with '{') turned into a fresh untrained model. One rank reads, every rank loads the bytes, so
// that all replicas are bitwise identical.
std::string model_bytes_from_path(const std::string &path);

class ModelSession {
 public:
  // Loads the model from model-file bytes and builds its evaluator. `precision` is any spelling
  // canonical_precision_name accepts; `chunk_size` is the number of centre atoms per chunk.
  ModelSession(const std::string &model_bytes, const std::string &precision, int64_t chunk_size);
  ~ModelSession();
  ModelSession(const ModelSession &) = delete;
  ModelSession &operator=(const ModelSession &) = delete;

  const std::vector<std::string> &elements() const;
  // The species index of an element, or -1 when the model does not know it.
  int species_index(const std::string &element) const;
  double cutoff() const;
  const std::string &units() const;
  int64_t committee_size() const;
  const std::string &dtype() const;
  const std::string &architecture() const;
  std::string precision_name() const;
  int64_t chunk_size() const;
  int64_t optimizer_steps() const;

  // LibTorch's intra-op threads (process-wide; a LAMMPS rank is one process).
  static void set_intra_op_threads(int threads);

  // Adds results to `outputs` (see atomic_system.h) and returns the rank's totals.
  EvaluationTotals evaluate(const AtomicSystemView &system, const EvaluationOutputs &outputs);

  // The model itself, for styles that train it (the next evaluation sees updated weights).
  std::shared_ptr<Potential> potential() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}    // namespace otf

#endif

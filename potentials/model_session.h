// The model a LAMMPS style evaluates (loaded weights, the inference evaluators and their options)
// behind a header free of LibTorch, so that LAMMPS styles compile without torch headers. Every
// function throws std::exception with a message meant for the user; the styles turn it into a
// LAMMPS error.
#ifndef OTF_POTENTIALS_MODEL_SESSION_H
#define OTF_POTENTIALS_MODEL_SESSION_H

#include "atomic_system.h"
#include "precision.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace otf {

class Potential;


// The bytes of a model file for `path`: a model file as it is, or a JSON spec file (starting
// with '{') turned into a fresh untrained model. One rank reads, every rank loads the bytes, so
// that all replicas are bitwise identical.
std::string model_bytes_from_path(const std::string &path);

// An array the MD code owns (a Kokkos view), borrowed for one call: its data in the memory of the
// session's device, with extents and strides in elements, so that any layout is read in place.
struct BorrowedArray {
  enum class Element { Int32, Float64 };
  void *data = nullptr;    // null: not given (outputs: not computed)
  Element element = Element::Float64;
  int rank = 1;
  int64_t extent[2] = {0, 1};
  int64_t stride[2] = {1, 1};
};
BorrowedArray borrowed_vector(const int *data, int64_t extent, int64_t stride);
BorrowedArray borrowed_vector(double *data, int64_t extent, int64_t stride);
BorrowedArray borrowed_matrix(const int *data, int64_t rows, int64_t columns, int64_t row_stride,
                              int64_t column_stride);
BorrowedArray borrowed_matrix(const double *data, int64_t rows, int64_t columns,
                              int64_t row_stride, int64_t column_stride);

// The arrays of pair_style otf/kk: positions, types and LAMMPS' Kokkos neighbour list (rows by
// atom index) in, forces, per-atom energies and virials added in place.
struct ResidentArrays {
  int num_atoms = 0;
  BorrowedArray positions;         // [num_atoms][3] double
  BorrowedArray types;             // [num_atoms] int
  BorrowedArray centers;           // [centres] int (ilist)
  BorrowedArray neighbor_counts;   // [rows] int (numneigh by atom)
  BorrowedArray neighbors;         // [rows][max neighbours] int
  int neighbor_index_mask = ~0;
  BorrowedArray forces;            // [num_atoms][3] double
  BorrowedArray atom_energy;       // [num_atoms] double
  BorrowedArray atom_virial;       // [num_atoms][6] double
};

class ModelSession {
 public:
  // Loads the model from model-file bytes and builds its evaluator in `precision`; `chunk_size`
  // is the number of centre atoms per chunk.
  ModelSession(const std::string &model_bytes, Precision precision, int64_t chunk_size);
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

  // Moves the model to the LibTorch device of a Kokkos execution space (otf::torch_device_for_
  // kokkos: the CPU for host spaces, cuda:N for Cuda) and returns its name ("cpu", "cuda:0").
  // Throws std::runtime_error with the mapping's message when LibTorch cannot serve the space.
  std::string place_on_kokkos_device(const std::string &execution_space, int device_id);
  std::string device_name() const;

  // Evaluates arrays in the memory of the model's device with no copies (ResidentEvaluator):
  // `species_of_type` maps atom types to model species (-1: ignored). When `host_uncertainty` is
  // not null, the centres' energy uncertainties are written there ([num_atoms], on the host).
  EvaluationTotals evaluate_resident(const ResidentArrays &arrays,
                                     const std::vector<int> &species_of_type,
                                     double *host_uncertainty);

  // The model itself, for styles that train it (the next evaluation sees updated weights).
  std::shared_ptr<Potential> potential() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}    // namespace otf

#endif

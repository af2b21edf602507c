// The whole configuration on one rank, for the references and records that need every atom at
// once (an ab initio code behind a socket, the label journal): owned atoms of every rank gathered
// to rank 0 in atom-id order, and per-atom results scattered back to their owners. MPI only; no
// LibTorch or LAMMPS types.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "reference.h"

namespace otf {

class FrameGather {
 public:
  // Collective: gathers ids, types and positions. Throws std::runtime_error (on rank 0 only,
  // where the frame is assembled) for an id held twice.
  FrameGather(const ReferenceConfiguration& configuration, MPI_Comm world);

  bool is_root() const { return rank_ == 0; }
  // Rank 0: the whole frame in id order; other ranks: empty.
  int64_t num_atoms() const { return static_cast<int64_t>(ids_.size()); }
  const std::vector<int64_t>& ids() const { return ids_; }
  const std::vector<int>& types() const { return types_; }
  const std::vector<double>& positions() const { return positions_; }  // [atoms][3]

  // Collective: `width` values per owned atom (local order) gathered to rank 0 in id order.
  std::vector<double> gather(const double* owned_values, int width) const;
  // Collective: rank 0's `whole` ([atoms][width], id order; ignored elsewhere) scattered back:
  // every rank gets its owned atoms' values in its local order.
  std::vector<double> scatter(const std::vector<double>& whole, int width) const;

 private:
  MPI_Comm world_;
  int rank_ = 0;
  int num_local_ = 0;
  // Rank 0: atoms per rank, their offsets in the gathered (rank-major) order, and for each
  // position of the id order the gathered index it came from.
  std::vector<int> counts_, offsets_;
  std::vector<int64_t> gathered_index_of_sorted_;
  std::vector<int64_t> ids_;
  std::vector<int> types_;
  std::vector<double> positions_;
};

}  // namespace otf

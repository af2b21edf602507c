// The MPI implementation of otf::Communicator: data-parallel training over the ranks of an MPI
// communicator (LAMMPS' world in production). Reductions give bitwise identical results on every
// rank, so replicas of the model stay identical step after step.
#pragma once

#include <mpi.h>

#include <vector>

#include "communicator.h"

namespace otf {

// Collective semantics: every member function except rank() and size() is a collective call.
// Every rank must call it, in the same order, with lists of the same length whose tensors have
// the same dtypes and shapes in the same order. A rank that passes a different list, or a tensor
// the communicator cannot reduce, makes the call throw std::invalid_argument on every rank (the
// inputs are compared in one small collective before any data moves), so a bad call fails loudly
// instead of corrupting data or hanging.
//
// Tensors: strided CPU or CUDA tensors, staged through one host buffer per call (one pack copy
// and one unpack copy, which also handle non-contiguous tensors and, for CUDA tensors, the
// transfers). Other devices (meta, ...) and sparse tensors are rejected. Reducing on the GPU
// (NCCL, CUDA-aware MPI) would avoid the host round trip; gradients of these models are small.
//
// all_reduce_sum and all_reduce_max accept float32, float64, bfloat16, float16, int32 and int64.
// bfloat16 and float16 tensors are packed into the float32 buffer: summed in float32 and rounded
// once to their dtype at the end (rounding after every partial sum would lose up to one bit per
// rank; torch.distributed's NCCL backend, by contrast, sums bf16 in bf16).
// broadcast accepts every dtype (it moves bytes).
class MpiCommunicator final : public Communicator {
 public:
  // Collective over `communicator`, which stays the caller's: this object works on a private
  // duplicate (MPI_Comm_dup), so its collectives can never be matched with the caller's own
  // messages (the "safe communication space" of MPI-3.1 section 6.1.2, as libraries like PETSc
  // do). Throws std::logic_error if MPI is not initialised or already finalised, and
  // std::invalid_argument for MPI_COMM_NULL.
  explicit MpiCommunicator(MPI_Comm communicator);
  // Frees the duplicate, unless MPI is already finalised (then there is nothing left to free).
  ~MpiCommunicator() override;

  // Owns the duplicate communicator.
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  MpiCommunicator(MpiCommunicator&&) = delete;
  MpiCommunicator& operator=(MpiCommunicator&&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Each element's sum is computed by exactly one rank and copied bytewise to the others, see
  // the .cpp. One collective round per dtype group, whatever the number of tensors.
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors) override;
  // Same path as the sum. NaN handling is MPI_MAX's (a C comparison): a NaN is not guaranteed to
  // win, but every rank gets the same result. GradScaler's found_inf is 0 or 1.
  void all_reduce_max(const std::vector<torch::Tensor>& tensors) override;
  // root must be in [0, size()); throws std::invalid_argument on every rank otherwise.
  void broadcast(const std::vector<torch::Tensor>& tensors, int root) override;
  // Bitwise identical on every rank, like the tensor sum.
  double all_reduce_sum(double value) override;
  // One MPI_Alltoall of the row counts (with width and dtype, which must agree: a mismatch throws
  // std::invalid_argument on the ranks that see it), then MPI_Isend/MPI_Irecv of bytes between
  // the ranks that have rows for each other only.
  std::vector<torch::Tensor> exchange_rows(const std::vector<torch::Tensor>& send) override;

  // The private duplicate, e.g. for a caller's own metrics collectives.
  MPI_Comm communicator() const { return communicator_; }

 private:
  enum class Reduction { kSum, kMax };
  void all_reduce(const std::vector<torch::Tensor>& tensors, Reduction reduction,
                  const char* function_name);

  MPI_Comm communicator_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace otf

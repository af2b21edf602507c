// The collective operations data-parallel training needs: summing gradients over ranks, agreeing
// on the GradScaler's found-inf, broadcasting parameters. One interface with a single-process
// implementation and an MPI one (mpi_communicator.h), so the engine needs no MPI to be tested and
// LAMMPS' own communicator drives the MPI one.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

namespace otf {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Element-wise sum over ranks, in place, with a result that is bitwise identical on every rank
  // (so replicas stay identical). Tensors: float32/float64/bfloat16/int tensors (MpiCommunicator: CPU or CUDA).
  virtual void all_reduce_sum(const std::vector<torch::Tensor>& tensors) = 0;
  // Element-wise maximum over ranks, in place.
  virtual void all_reduce_max(const std::vector<torch::Tensor>& tensors) = 0;
  // Overwrites the tensors on every rank with root's values.
  virtual void broadcast(const std::vector<torch::Tensor>& tensors, int root) = 0;
  // Scalars, for metrics (validation errors, counts).
  virtual double all_reduce_sum(double value) = 0;
  // Point-to-point rows: send[r] ([rows, width], any dtype, CPU or CUDA) goes to rank r, and the
  // result's entry r is what rank r sent to this rank (on the device of the tensors sent). Every
  // rank passes size() tensors of one dtype and width; only ranks with rows to move exchange
  // messages (the halo exchange of frames split over ranks, potential_training.h).
  virtual std::vector<torch::Tensor> exchange_rows(const std::vector<torch::Tensor>& send) = 0;
};

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(const std::vector<torch::Tensor>& /*tensors*/) override {}
  void all_reduce_max(const std::vector<torch::Tensor>& /*tensors*/) override {}
  void broadcast(const std::vector<torch::Tensor>& /*tensors*/, int /*root*/) override {}
  double all_reduce_sum(double value) override { return value; }
  std::vector<torch::Tensor> exchange_rows(const std::vector<torch::Tensor>& send) override;
};

// Sums the gradients of `parameters` over ranks (parameters without a gradient get a zero one
// first, so every rank reduces the same list). Data-parallel training with a loss that is a sum
// over the ranks' atoms needs exactly this sum.
void all_reduce_gradients(Communicator& communicator, const std::vector<torch::Tensor>& parameters);

// Makes every rank start from rank `root`'s parameters.
void broadcast_parameters(Communicator& communicator, const std::vector<torch::Tensor>& parameters,
                          int root = 0);

// The GradScaler's found-inf reducer for this communicator: every rank skips when any rank found
// inf or nan.
std::function<void(torch::Tensor& found_inf)> found_inf_reducer(
    std::shared_ptr<Communicator> communicator);

}  // namespace otf

#include "communicator.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace otf {

std::vector<torch::Tensor> SingleProcessCommunicator::exchange_rows(
    const std::vector<torch::Tensor>& send) {
  if (send.size() != 1) {
    throw std::invalid_argument("exchange_rows: one tensor per rank expected (1 rank, got " +
                                std::to_string(send.size()) + ")");
  }
  return send;
}

void all_reduce_gradients(Communicator& communicator,
                          const std::vector<torch::Tensor>& parameters) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> gradients;
  gradients.reserve(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    const torch::Tensor& parameter = parameters[i];
    if (!parameter.defined()) {
      throw std::invalid_argument("all_reduce_gradients: parameter " + std::to_string(i) +
                                  " is undefined");
    }
    // Frozen parameters are frozen on every rank (a property of the model, not of the data), so
    // skipping them keeps the lists equal; a zero grad would make the optimizer move them (Adam
    // and SGD with weight decay step on a zero gradient).
    if (!parameter.requires_grad()) {
      continue;
    }
    // A parameter that this rank's batch did not reach (e.g. an element absent here) still gets
    // the other ranks' gradient; a zero of its own keeps the list the same on every rank.
    if (!parameter.grad().defined()) {
      parameter.mutable_grad() = torch::zeros_like(parameter);
    }
    gradients.push_back(parameter.grad());
  }
  // One call for the whole list: the communicator packs it into one buffer per dtype. Sums keep
  // inf and NaN (inf + x = inf, NaN + x = NaN), so a rank's overflow reaches every rank's
  // GradScaler.
  communicator.all_reduce_sum(gradients);
}

void broadcast_parameters(Communicator& communicator, const std::vector<torch::Tensor>& parameters,
                          int root) {
  // In-place writes to leaves that require grad are only allowed outside autograd.
  torch::NoGradGuard no_grad;
  communicator.broadcast(parameters, root);
}

std::function<void(torch::Tensor& found_inf)> found_inf_reducer(
    std::shared_ptr<Communicator> communicator) {
  if (!communicator) {
    throw std::invalid_argument("found_inf_reducer: the communicator is null");
  }
  // Captures the shared_ptr: the GradScaler that holds the reducer keeps the communicator alive.
  // PyTorch's ShardedGradScaler (torch/distributed/fsdp/sharded_grad_scaler.py) all-reduces
  // found_inf with a SUM; MAX takes the same decision (GradScaler tests found_inf != 0: any
  // rank's 1 makes every rank skip) and keeps the value 0 or 1.
  return [communicator = std::move(communicator)](torch::Tensor& found_inf) {
    communicator->all_reduce_max({found_inf});
  };
}

}  // namespace otf

// Tests of the communicator interface without MPI: the single-process communicator, and the
// generic all_reduce_gradients / broadcast_parameters / found_inf_reducer driven by a simulated
// second rank. The MPI implementation is tested under mpiexec in tests/mpi.
#include "communicator.h"
#include "tensor_lists.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "grad_scaler.h"

namespace {

using otf::Communicator;
using otf::SingleProcessCommunicator;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rank 0 of two, where the other rank's contribution to every element is `peer_value` (its
// gradient for a sum, its found_inf for a max) and its broadcast values are `peer_value` too.
// Records the calls so that tests can check what the generic functions hand to a communicator.
class SimulatedPeerCommunicator final : public Communicator {
 public:
  explicit SimulatedPeerCommunicator(double peer_value) : peer_value_(peer_value) {}

  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors) override {
    sum_calls.push_back(tensors);
    for (const auto& tensor : tensors) tensor.add_(peer_value_);
  }
  void all_reduce_max(const std::vector<torch::Tensor>& tensors) override {
    max_calls.push_back(tensors);
    for (const auto& tensor : tensors) tensor.clamp_min_(peer_value_);
  }
  void broadcast(const std::vector<torch::Tensor>& tensors, int root) override {
    broadcast_roots.push_back(root);
    if (root != rank()) {
      for (const auto& tensor : tensors) tensor.fill_(peer_value_);
    }
  }
  double all_reduce_sum(double value) override { return value + peer_value_; }
  // The other ranks have no rows for this one.
  std::vector<torch::Tensor> exchange_rows(const std::vector<torch::Tensor>& send) override {
    std::vector<torch::Tensor> received;
    for (std::size_t r = 0; r < send.size(); ++r)
      received.push_back(static_cast<int>(r) == rank() ? send[r] : send[r].narrow(0, 0, 0));
    return received;
  }

  std::vector<std::vector<torch::Tensor>> sum_calls;
  std::vector<std::vector<torch::Tensor>> max_calls;
  std::vector<int> broadcast_roots;

 private:
  double peer_value_;
};

struct TinyModel : torch::nn::Module {
  TinyModel() {
    first = register_module("first", torch::nn::Linear(3, 4));
    second = register_module("second", torch::nn::Linear(4, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return second(torch::tanh(first(x))); }
  torch::nn::Linear first{nullptr};
  torch::nn::Linear second{nullptr};
};

using otf::testing::clones;
TEST(SingleProcessCommunicator, IsRankZeroOfOneAndLeavesValuesAsTheyAre) {
  SingleProcessCommunicator communicator;
  EXPECT_EQ(communicator.rank(), 0);
  EXPECT_EQ(communicator.size(), 1);
  const std::vector<torch::Tensor> tensors = {torch::tensor({1.5f, -2.0f}),
                                              torch::tensor({3.0}, torch::kFloat64),
                                              torch::tensor({7}, torch::kInt64)};
  const auto before = clones(tensors);
  communicator.all_reduce_sum(tensors);
  communicator.all_reduce_max(tensors);
  communicator.broadcast(tensors, 0);
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_TRUE(torch::equal(tensors[i], before[i]));
  EXPECT_EQ(communicator.all_reduce_sum(0.25), 0.25);
}

TEST(AllReduceGradients, GivesParametersWithoutGradientAZeroOneAndKeepsTheOthers) {
  TinyModel model;
  // Only `second` takes part in this rank's loss: `first` has no gradient.
  model.second->forward(torch::ones({2, 4})).sum().backward();
  ASSERT_FALSE(model.first->weight.grad().defined());
  const auto second_weight_grad = model.second->weight.grad().clone();

  SingleProcessCommunicator communicator;
  otf::all_reduce_gradients(communicator, model.parameters());
  for (const auto& parameter : model.first->parameters()) {
    ASSERT_TRUE(parameter.grad().defined());
    EXPECT_EQ(parameter.grad().sizes(), parameter.sizes());
    EXPECT_EQ(parameter.grad().scalar_type(), parameter.scalar_type());
    EXPECT_TRUE(torch::equal(parameter.grad(), torch::zeros_like(parameter)));
  }
  EXPECT_TRUE(torch::equal(model.second->weight.grad(), second_weight_grad));
}

TEST(AllReduceGradients, HandsTheWholeGradientListInParameterOrderToOneSumAndWritesInPlace) {
  TinyModel model;
  model.forward(torch::randn({5, 3})).sum().backward();
  const auto parameters = model.parameters();
  const auto local_grads = [&] {
    std::vector<torch::Tensor> grads;
    for (const auto& parameter : parameters) grads.push_back(parameter.grad().clone());
    return grads;
  }();

  SimulatedPeerCommunicator communicator(/*peer_value=*/0.5);
  otf::all_reduce_gradients(communicator, parameters);
  ASSERT_EQ(communicator.sum_calls.size(), 1u) << "one collective per optimizer step";
  ASSERT_EQ(communicator.sum_calls[0].size(), parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    // The very gradient tensors, not copies: the sum lands where the optimizer reads it.
    EXPECT_TRUE(communicator.sum_calls[0][i].is_same(parameters[i].grad())) << i;
    EXPECT_TRUE(torch::equal(parameters[i].grad(), local_grads[i] + 0.5)) << i;
  }
}

TEST(AllReduceGradients, SkipsFrozenParametersSoTheOptimizerDoesNotMoveThem) {
  TinyModel model;
  model.first->weight.set_requires_grad(false);
  model.forward(torch::randn({5, 3})).sum().backward();
  SimulatedPeerCommunicator communicator(0.0);
  otf::all_reduce_gradients(communicator, model.parameters());
  EXPECT_FALSE(model.first->weight.grad().defined());
  ASSERT_EQ(communicator.sum_calls.size(), 1u);
  EXPECT_EQ(communicator.sum_calls[0].size(), model.parameters().size() - 1);
}

TEST(AllReduceGradients, RejectsAnUndefinedParameter) {
  SingleProcessCommunicator communicator;
  EXPECT_THROW(otf::all_reduce_gradients(communicator, {torch::Tensor()}), std::invalid_argument);
}

TEST(AllReduceGradients, AnotherRanksOverflowMakesThisRanksScalerSkip) {
  // Summing keeps inf: the other rank's overflow reaches this rank's gradients, so the GradScaler
  // skips here too, even without a found-inf reducer.
  TinyModel model;
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.1));
  otf::GradScaler scaler;
  scaler.scale(model.forward(torch::randn({5, 3})).sum()).backward();
  const auto parameters_before = clones(model.parameters());
  SimulatedPeerCommunicator communicator(kInf);
  otf::all_reduce_gradients(communicator, model.parameters());
  EXPECT_FALSE(scaler.step(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  for (size_t i = 0; i < parameters_before.size(); ++i)
    EXPECT_TRUE(torch::equal(model.parameters()[i], parameters_before[i]));
}

TEST(BroadcastParameters, OverwritesLeavesThatRequireGradWithTheRootsValues) {
  TinyModel model;
  SimulatedPeerCommunicator communicator(/*peer_value=*/0.125);
  otf::broadcast_parameters(communicator, model.parameters(), /*root=*/1);
  ASSERT_EQ(communicator.broadcast_roots, std::vector<int>{1});
  for (const auto& parameter : model.parameters()) {
    EXPECT_TRUE(parameter.requires_grad());
    EXPECT_TRUE(torch::equal(parameter, torch::full_like(parameter, 0.125)));
  }
}

TEST(BroadcastParameters, DefaultRootIsZero) {
  TinyModel model;
  const auto before = clones(model.parameters());
  SimulatedPeerCommunicator communicator(0.125);
  otf::broadcast_parameters(communicator, model.parameters());
  ASSERT_EQ(communicator.broadcast_roots, std::vector<int>{0});
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(torch::equal(model.parameters()[i], before[i]));
}

TEST(FoundInfReducer, TakesTheMaximumOverRanksInPlace) {
  const auto communicator = std::make_shared<SimulatedPeerCommunicator>(1.0);
  const auto reduce = otf::found_inf_reducer(communicator);
  torch::Tensor found_inf = torch::zeros({}, torch::kFloat);
  const torch::Tensor same_tensor = found_inf;
  reduce(found_inf);
  EXPECT_EQ(found_inf.item<float>(), 1.0f);
  EXPECT_TRUE(found_inf.is_same(same_tensor)) << "in place: GradScaler keeps its own tensor";
  ASSERT_EQ(communicator->max_calls.size(), 1u);
  EXPECT_TRUE(communicator->max_calls[0][0].is_same(found_inf));
}

TEST(FoundInfReducer, SingleProcessLeavesFoundInfAlone) {
  const auto reduce = otf::found_inf_reducer(std::make_shared<SingleProcessCommunicator>());
  torch::Tensor found_inf = torch::ones({}, torch::kFloat);
  reduce(found_inf);
  EXPECT_EQ(found_inf.item<float>(), 1.0f);
  found_inf.zero_();
  reduce(found_inf);
  EXPECT_EQ(found_inf.item<float>(), 0.0f);
}

TEST(FoundInfReducer, KeepsTheCommunicatorAlive) {
  auto communicator = std::make_shared<SimulatedPeerCommunicator>(1.0);
  const std::weak_ptr<SimulatedPeerCommunicator> observer = communicator;
  auto reduce = otf::found_inf_reducer(communicator);
  communicator.reset();
  EXPECT_FALSE(observer.expired());
  torch::Tensor found_inf = torch::zeros({}, torch::kFloat);
  reduce(found_inf);
  EXPECT_EQ(found_inf.item<float>(), 1.0f);
  reduce = nullptr;
  EXPECT_TRUE(observer.expired());
}

TEST(FoundInfReducer, RejectsANullCommunicator) {
  EXPECT_THROW(otf::found_inf_reducer(nullptr), std::invalid_argument);
}

TEST(FoundInfReducer, AnotherRanksInfMakesAFiniteRankSkipAndBackOff) {
  TinyModel model;
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(1e-2));
  otf::GradScaler scaler;
  scaler.set_found_inf_reducer(
      otf::found_inf_reducer(std::make_shared<SimulatedPeerCommunicator>(1.0)));
  scaler.scale(model.forward(torch::randn({5, 3})).sum()).backward();
  const auto parameters_before = clones(model.parameters());
  EXPECT_FALSE(scaler.step(optimizer)) << "this rank's gradients are finite, the other's are not";
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  for (size_t i = 0; i < parameters_before.size(); ++i)
    EXPECT_TRUE(torch::equal(model.parameters()[i], parameters_before[i]));
  EXPECT_TRUE(optimizer.state().empty()) << "a skipped step must not create Adam state";
}

}  // namespace

// Tests of otf::MpiCommunicator under mpiexec (registered with 1 and 2 ranks): every collective
// gives the right numbers on every rank and bitwise identical ones across ranks, bad calls fail
// on every rank together, and data-parallel training keeps replicas bitwise identical while
// matching single-process training on the union of the ranks' data.
//
// Rules that keep a failure on one rank from hanging the others: every rank runs the same tests
// in the same order (checked by a listener), every collective is called unconditionally, checks
// come after the collectives and use EXPECT (ASSERT returns early and would skip a collective the
// other ranks then wait in), cross-rank comparisons use raw MPI on MPI_COMM_WORLD so they do not
// depend on the code under test, and an exception that escapes a test aborts the job instead of
// letting this rank run ahead (see main).
#include "mpi_communicator.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autocast_region.h"
#include "communicator.h"
#include "tensor_lists.h"
#include "grad_scaler.h"
#include "mixed_precision_hook.h"
#include "precision.h"
#include "torch_compat.h"
#include "training_strategy.h"

namespace {

using otf::Precision;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Created in main after MPI_Init and destroyed before MPI_Finalize.
std::shared_ptr<otf::MpiCommunicator> world_communicator;

otf::MpiCommunicator& world() { return *world_communicator; }

// ---- Cross-rank checks with raw MPI on MPI_COMM_WORLD (independent of the code under test) ----

bool on_every_rank(bool local) {
  int all = local ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

std::vector<unsigned char> bytes_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<unsigned char> bytes;
  for (const auto& tensor : tensors) {
    const torch::Tensor contiguous = tensor.detach().contiguous();
    const auto* begin = static_cast<const unsigned char*>(contiguous.data_ptr());
    bytes.insert(bytes.end(), begin, begin + contiguous.numel() * contiguous.element_size());
  }
  return bytes;
}

// True on every rank when every rank holds the same bytes as rank 0 (NaN payloads included).
bool same_bytes_on_every_rank(const std::vector<torch::Tensor>& tensors) {
  const std::vector<unsigned char> local = bytes_of(tensors);
  uint64_t root_byte_count = local.size();
  MPI_Bcast(&root_byte_count, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::vector<unsigned char> root_bytes = local;
  root_bytes.resize(root_byte_count);
  MPI_Bcast(root_bytes.data(), static_cast<int>(root_byte_count), MPI_BYTE, 0, MPI_COMM_WORLD);
  return on_every_rank(root_bytes == local);
}

bool same_on_every_rank(double value) {
  return same_bytes_on_every_rank({torch::tensor({value}, torch::kFloat64)});
}

// ---- Reductions ----

// What `rank` contributes: different on every rank, reproducible on all of them.
torch::Tensor contribution(int rank, c10::ScalarType dtype, int salt) {
  torch::manual_seed(1000 * salt + rank);
  const torch::Tensor values = torch::randn({6, 5}) * 8.0;
  if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
    return (values * 1000.0).round().to(dtype);
  }
  return values.to(dtype);
}

c10::ScalarType buffer_dtype_of(c10::ScalarType dtype) {
  return dtype == torch::kBFloat16 || dtype == torch::kHalf ? torch::kFloat : dtype;
}

// MpiCommunicator's documented result: a rank-order sum in the buffer dtype (float32 for bf16
// and fp16), rounded once. With one or two ranks the order MPI adds in cannot matter.
torch::Tensor expected_sum(c10::ScalarType dtype, int salt) {
  torch::Tensor sum = contribution(0, dtype, salt).to(buffer_dtype_of(dtype));
  for (int rank = 1; rank < world().size(); ++rank) {
    sum = sum + contribution(rank, dtype, salt).to(buffer_dtype_of(dtype));
  }
  return sum.to(dtype);
}

torch::Tensor expected_max(c10::ScalarType dtype, int salt) {
  torch::Tensor max = contribution(0, dtype, salt);
  for (int rank = 1; rank < world().size(); ++rank) {
    max = torch::maximum(max, contribution(rank, dtype, salt));
  }
  return max;
}

bool matches_expected_sum(const torch::Tensor& result, const torch::Tensor& expected) {
  if (world().size() <= 2 || !result.is_floating_point()) {
    return torch::equal(result, expected);
  }
  // More ranks: MPI chooses the order in which the owning rank adds the contributions.
  return torch::allclose(result.to(torch::kDouble), expected.to(torch::kDouble), 1e-5, 1e-5);
}

const std::vector<c10::ScalarType> kReducibleDtypes = {
    torch::kFloat, torch::kDouble, torch::kBFloat16, torch::kHalf, torch::kInt, torch::kLong};

TEST(MpiCommunicator, WorksOnAPrivateDuplicateOfTheCallersCommunicator) {
  int world_rank = 0;
  int world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(world().rank(), world_rank);
  EXPECT_EQ(world().size(), world_size);
  int comparison = MPI_UNEQUAL;
  MPI_Comm_compare(world().communicator(), MPI_COMM_WORLD, &comparison);
  EXPECT_EQ(comparison, MPI_CONGRUENT) << "same group, own context";
  {
    otf::MpiCommunicator short_lived(MPI_COMM_WORLD);
    EXPECT_EQ(short_lived.all_reduce_sum(1.0), static_cast<double>(world_size));
  }
  // Destroying it left the caller's communicator usable.
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  // Rejected before any collective, so no rank waits for another.
  EXPECT_THROW({ otf::MpiCommunicator null_communicator(MPI_COMM_NULL); }, std::invalid_argument);
}

TEST(MpiCommunicator, SumOfEachDtypeIsCorrectAndBitwiseEqualOnEveryRank) {
  for (const c10::ScalarType dtype : kReducibleDtypes) {
    const torch::Tensor tensor = contribution(world().rank(), dtype, 1);
    world().all_reduce_sum({tensor});
    EXPECT_EQ(tensor.scalar_type(), dtype);
    EXPECT_TRUE(matches_expected_sum(tensor, expected_sum(dtype, 1)))
        << dtype << " on rank " << world().rank();
    EXPECT_TRUE(same_bytes_on_every_rank({tensor})) << dtype;
  }
}

TEST(MpiCommunicator, OneCallSumsAMixedListOfDtypesShapesAndStrides) {
  // As all_reduce_gradients uses it: many tensors, several dtypes, one call.
  std::vector<torch::Tensor> tensors;
  std::vector<torch::Tensor> expected;
  int salt = 10;
  for (const c10::ScalarType dtype : kReducibleDtypes) {
    // Transposed: not contiguous.
    tensors.push_back(contribution(world().rank(), dtype, salt).t());
    expected.push_back(expected_sum(dtype, salt).t());
    ++salt;
    // A 0-dim view and an empty tensor between the others.
    tensors.push_back(contribution(world().rank(), dtype, salt)[1][2]);
    expected.push_back(expected_sum(dtype, salt)[1][2]);
    ++salt;
    tensors.push_back(torch::empty({0, 3}, torch::TensorOptions().dtype(dtype)));
    expected.push_back(torch::empty({0, 3}, torch::TensorOptions().dtype(dtype)));
  }
  // A view of some columns: the other columns of its base must stay as they are.
  const torch::Tensor parent = contribution(world().rank(), torch::kFloat, 99);
  tensors.push_back(parent.narrow(1, 1, 3));
  expected.push_back(expected_sum(torch::kFloat, 99).narrow(1, 1, 3));

  world().all_reduce_sum(tensors);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].sizes(), expected[i].sizes()) << i;
    EXPECT_TRUE(matches_expected_sum(tensors[i], expected[i])) << "tensor " << i;
  }
  EXPECT_FALSE(tensors[0].is_contiguous()) << "the result is written into the caller's view";
  // Only the viewed columns of the parent changed.
  const torch::Tensor untouched = contribution(world().rank(), torch::kFloat, 99);
  EXPECT_TRUE(torch::equal(parent.narrow(1, 0, 1), untouched.narrow(1, 0, 1)));
  EXPECT_TRUE(torch::equal(parent.narrow(1, 4, 1), untouched.narrow(1, 4, 1)));
  EXPECT_TRUE(same_bytes_on_every_rank(tensors));
}

TEST(MpiCommunicator, BFloat16SumIsTheFloat32SumRoundedOnce) {
  // Rank 0 holds 1, rank r > 0 holds 3r * 2^-8 (all exact in bf16, and so is their float32
  // sum). With two ranks 1 + 3 * 2^-8 lies halfway between the bf16 neighbours 1 + 2^-7 and
  // 1 + 2^-6 (ulp 2^-7 in [1, 2)) and rounds to the even one, 1 + 2^-6. With three or more
  // ranks a bf16 running sum would round after every addition; the float32 sum rounds once.
  const auto value_of = [](int rank) { return rank == 0 ? 1.0 : 3.0 * rank * std::ldexp(1.0, -8); };
  const torch::Tensor tensor =
      torch::full({4}, value_of(world().rank()), torch::TensorOptions().dtype(torch::kBFloat16));
  world().all_reduce_sum({tensor});
  float float32_sum = 0.0f;
  for (int rank = 0; rank < world().size(); ++rank)
    float32_sum += static_cast<float>(value_of(rank));
  const torch::Tensor rounded_once = torch::full({4}, float32_sum).to(torch::kBFloat16);
  if (world().size() == 2) {
    EXPECT_EQ(rounded_once[0].item<float>(), 1.0f + std::ldexp(1.0f, -6));
  }
  EXPECT_TRUE(torch::equal(tensor, rounded_once))
      << tensor.to(torch::kFloat) << " vs " << rounded_once.to(torch::kFloat);
  EXPECT_TRUE(same_bytes_on_every_rank({tensor}));
}

TEST(MpiCommunicator, MaxOfEachDtypeIsExactOnEveryRank) {
  for (const c10::ScalarType dtype : kReducibleDtypes) {
    const torch::Tensor tensor = contribution(world().rank(), dtype, 20);
    world().all_reduce_max({tensor});
    EXPECT_TRUE(torch::equal(tensor, expected_max(dtype, 20))) << dtype;
    EXPECT_TRUE(same_bytes_on_every_rank({tensor})) << dtype;
  }
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsTensorsOfAnyDtype) {
  const int root = world().size() - 1;
  const int rank = world().rank();
  const std::vector<c10::ScalarType> dtypes = {torch::kFloat, torch::kDouble, torch::kBFloat16,
                                               torch::kHalf,  torch::kInt,    torch::kLong};
  std::vector<torch::Tensor> tensors;
  std::vector<torch::Tensor> expected;
  int salt = 30;
  for (const c10::ScalarType dtype : dtypes) {
    tensors.push_back(contribution(rank, dtype, salt).t());
    expected.push_back(contribution(root, dtype, salt).t());
    ++salt;
  }
  // A bool tensor and a byte tensor (odd sizes: alignment of what follows), a leaf requiring
  // grad (a parameter), a 0-dim tensor.
  tensors.push_back(torch::full({3}, rank == root, torch::TensorOptions().dtype(torch::kBool)));
  expected.push_back(torch::full({3}, true, torch::TensorOptions().dtype(torch::kBool)));
  tensors.push_back(torch::full({5}, rank, torch::TensorOptions().dtype(torch::kByte)));
  expected.push_back(torch::full({5}, root, torch::TensorOptions().dtype(torch::kByte)));
  tensors.push_back(contribution(rank, torch::kDouble, 40).requires_grad_(true));
  expected.push_back(contribution(root, torch::kDouble, 40));
  tensors.push_back(torch::tensor(static_cast<int64_t>(rank)));
  expected.push_back(torch::tensor(static_cast<int64_t>(root)));

  world().broadcast(tensors, root);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(torch::equal(tensors[i].detach(), expected[i])) << "tensor " << i;
  }
  EXPECT_TRUE(tensors[8].requires_grad() && tensors[8].is_leaf());
  EXPECT_TRUE(same_bytes_on_every_rank(tensors));
}

TEST(MpiCommunicator, ScalarSumIsCorrectAndBitwiseEqualOnEveryRank) {
  const double sum = world().all_reduce_sum(0.1 * (world().rank() + 1));
  double expected = 0.0;
  for (int rank = 0; rank < world().size(); ++rank) expected += 0.1 * (rank + 1);
  if (world().size() <= 2) {
    EXPECT_EQ(sum, expected);
  } else {
    EXPECT_NEAR(sum, expected, 1e-12);
  }
  EXPECT_TRUE(same_on_every_rank(sum));
}

TEST(MpiCommunicator, InfAndNanOnOneRankReachEveryRank) {
  const int last = world().size() - 1;
  const torch::Tensor tensor = torch::ones({4});
  if (world().rank() == last) {
    tensor[1] = kInf;
    tensor[2] = kNaN;
  }
  world().all_reduce_sum({tensor});
  EXPECT_EQ(tensor[0].item<float>(), static_cast<float>(world().size()));
  EXPECT_TRUE(std::isinf(tensor[1].item<float>()));
  EXPECT_TRUE(std::isnan(tensor[2].item<float>()));
}

TEST(MpiCommunicator, AnInvalidTensorOnOneRankMakesEveryRankThrowAndNothingMove) {
  const int last = world().size() - 1;
  const torch::Tensor good = torch::full({3}, 2.0);
  const torch::Tensor bad =
      world().rank() == last ? torch::zeros({2}, torch::kBool) : torch::zeros({2}, torch::kFloat);
  EXPECT_THROW(world().all_reduce_sum({good, bad}), std::invalid_argument);
  EXPECT_TRUE(torch::equal(good, torch::full({3}, 2.0)));
  // Tensors on a device it cannot stage (meta) and sparse tensors, on every rank.
  EXPECT_THROW(world().all_reduce_sum({torch::empty({2}, torch::kMeta)}), std::invalid_argument);
  EXPECT_THROW(world().all_reduce_max({torch::eye(2).to_sparse()}), std::invalid_argument);
  EXPECT_THROW(world().broadcast({torch::Tensor()}, 0), std::invalid_argument);
  EXPECT_THROW(world().broadcast({good}, world().size()), std::invalid_argument);
  // The communicator is still in step on every rank.
  world().all_reduce_sum({good});
  EXPECT_TRUE(torch::equal(good, torch::full({3}, 2.0 * world().size())));
}

TEST(MpiCommunicator, DifferentListsOnDifferentRanksMakeEveryRankThrow) {
  const bool last = world().rank() == world().size() - 1;
  const bool several_ranks = world().size() > 1;
  // One tensor more on the last rank.
  std::vector<torch::Tensor> tensors = {torch::ones({3})};
  if (last && several_ranks) tensors.push_back(torch::ones({1}));
  if (several_ranks) {
    EXPECT_THROW(world().all_reduce_sum(tensors), std::invalid_argument);
  } else {
    EXPECT_NO_THROW(world().all_reduce_sum(tensors));
  }
  // Same count, another shape.
  const torch::Tensor shaped = last && several_ranks ? torch::ones({2, 2}) : torch::ones({4});
  if (several_ranks) {
    EXPECT_THROW(world().all_reduce_max({shaped}), std::invalid_argument);
    EXPECT_THROW(world().broadcast({shaped}, 0), std::invalid_argument);
  }
  // Another root.
  if (several_ranks) {
    EXPECT_THROW(world().broadcast({torch::ones({1})}, last ? 1 : 0), std::invalid_argument);
  }
  const torch::Tensor after = torch::ones({2});
  world().all_reduce_sum({after});
  EXPECT_TRUE(torch::equal(after, torch::full({2}, static_cast<float>(world().size()))));
}

// ---- Row exchange (the halo exchange of frames split over ranks) ----

// Rank r sends rank s (s + 1) rows holding 100 r + s (none to the rank after it): each rank gets
// exactly what every rank addressed to it, in any dtype (bytes move), on the device sent from.
TEST(MpiCommunicator, ExchangeRowsDeliversWhatEachRankAddressedToEachOther) {
  const int rank = world().rank(), size = world().size();
  for (const c10::ScalarType dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kInt64}) {
    std::vector<torch::Tensor> send;
    for (int s = 0; s < size; ++s) {
      const int64_t rows = (s == (rank + 1) % size && size > 1) ? 0 : s + 1;
      send.push_back(torch::full({rows, 3}, 100 * rank + s, torch::TensorOptions().dtype(dtype)));
    }
    const std::vector<torch::Tensor> received = world().exchange_rows(send);
    ASSERT_EQ(static_cast<int>(received.size()), size);
    for (int r = 0; r < size; ++r) {
      const int64_t rows = (rank == (r + 1) % size && size > 1) ? 0 : rank + 1;
      const torch::Tensor expected = torch::full({rows, 3}, 100 * r + rank, torch::TensorOptions().dtype(dtype));
      EXPECT_TRUE(torch::equal(received[static_cast<size_t>(r)], expected))
          << "from rank " << r << " on rank " << rank << ", " << c10::toString(dtype);
    }
  }
  // A non-contiguous slice is sent as its values.
  std::vector<torch::Tensor> strided;
  for (int s = 0; s < size; ++s)
    strided.push_back(torch::arange(12, torch::kFloat64).reshape({3, 4}).t().narrow(0, 0, 2) + rank);
  const std::vector<torch::Tensor> got = world().exchange_rows(strided);
  for (int r = 0; r < size; ++r)
    EXPECT_TRUE(torch::equal(got[static_cast<size_t>(r)],
                             torch::arange(12, torch::kFloat64).reshape({3, 4}).t().narrow(0, 0, 2) + r));
}

TEST(MpiCommunicator, ExchangeRowsOfAnotherWidthOrDtypeOnOneRankMakeEveryRankThrow) {
  const int size = world().size();
  const bool last = world().rank() == size - 1;
  if (size == 1) {
    EXPECT_THROW(world().exchange_rows({torch::ones({2, 3}), torch::ones({2, 3})}), std::invalid_argument);
    EXPECT_THROW(world().exchange_rows({torch::ones({3})}), std::invalid_argument);
    return;
  }
  const int64_t width = last ? 4 : 3;
  EXPECT_THROW(world().exchange_rows(std::vector<torch::Tensor>(static_cast<size_t>(size), torch::ones({1, width}))),
               std::invalid_argument);
  const auto dtype = last ? torch::kFloat64 : torch::kFloat32;
  EXPECT_THROW(world().exchange_rows(std::vector<torch::Tensor>(
                   static_cast<size_t>(size), torch::ones({1, 3}, torch::TensorOptions().dtype(dtype)))),
               std::invalid_argument);
  // Nothing was left in flight: a later collective works.
  const torch::Tensor after = torch::ones({2});
  world().all_reduce_sum({after});
  EXPECT_TRUE(torch::equal(after, torch::full({2}, static_cast<float>(size))));
}

// ---- GradScaler agreement ----

struct TinyModel : torch::nn::Module {
  TinyModel() {
    first = register_module("first", torch::nn::Linear(3, 4));
    second = register_module("second", torch::nn::Linear(4, 1));
  }
  torch::nn::Linear first{nullptr};
  torch::nn::Linear second{nullptr};
};

using otf::testing::clones;
using otf::testing::all_equal;
TEST(FoundInfReducer, EveryRankSkipsWhenOneRankOverflowedAndBacksOffIdentically) {
  // Gradients are not summed here: only the reducer can make the ranks agree.
  const int rank = world().rank();
  const bool overflowing_rank = world().size() > 1 && rank == 1;
  torch::manual_seed(5);
  TinyModel model;
  const auto parameters = model.parameters();
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-2));
  otf::GradScaler scaler;
  scaler.set_found_inf_reducer(otf::found_inf_reducer(world_communicator));
  static_cast<void>(scaler.scale(torch::ones({})));  // creates the scale, as scale(loss) does
  for (const auto& parameter : parameters) {
    parameter.mutable_grad() = torch::full_like(parameter, 1.0 + rank);
  }
  if (overflowing_rank) model.second->weight.mutable_grad()[0][2] = kInf;
  const auto before = clones(parameters);

  const bool stepped = scaler.step(optimizer);
  scaler.update();
  const bool expect_step = world().size() == 1;
  EXPECT_EQ(stepped, expect_step) << "rank " << rank;
  EXPECT_EQ(scaler.get_scale(), expect_step ? 65536.0 : 32768.0) << "rank " << rank;
  EXPECT_EQ(all_equal(clones(parameters), before), !expect_step) << "rank " << rank;
  EXPECT_TRUE(on_every_rank(stepped == expect_step));
  EXPECT_TRUE(same_on_every_rank(scaler.get_scale()));
  EXPECT_TRUE(same_bytes_on_every_rank({scaler.scale_tensor(), scaler.growth_tracker_tensor()}));

  // Next iteration, finite everywhere: every rank steps and the tracker counts on every rank.
  for (const auto& parameter : parameters) parameter.mutable_grad().fill_(0.5);
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  EXPECT_TRUE(same_bytes_on_every_rank({scaler.scale_tensor(), scaler.growth_tracker_tensor()}));
}

TEST(AllReduceGradients, GradientsMissingOnSomeRanksAndNonFiniteOnesAreSummedEverywhere) {
  const int rank = world().rank();
  const int last = world().size() - 1;
  torch::manual_seed(6);
  TinyModel model;
  // Only the last rank's batch reaches `first` (e.g. an element present only there).
  if (rank == last) {
    model.second->forward(torch::tanh(model.first->forward(torch::ones({2, 3})))).sum().backward();
  } else {
    model.second->forward(torch::ones({2, 4})).sum().backward();
  }
  // Every rank can compute the last rank's gradient: same seed, same model, same batch.
  const torch::Tensor last_ranks_first_bias_grad = [] {
    torch::manual_seed(6);
    TinyModel same_model;
    same_model.second->forward(torch::tanh(same_model.first->forward(torch::ones({2, 3}))))
        .sum()
        .backward();
    return same_model.first->bias.grad();
  }();
  if (rank == last) model.second->bias.mutable_grad()[0] = kNaN;

  otf::all_reduce_gradients(world(), model.parameters());
  EXPECT_TRUE(torch::equal(model.first->bias.grad(), last_ranks_first_bias_grad));
  EXPECT_TRUE(std::isnan(model.second->bias.grad()[0].item<float>()));
  std::vector<torch::Tensor> grads;
  for (const auto& parameter : model.parameters()) grads.push_back(parameter.grad());
  EXPECT_TRUE(same_bytes_on_every_rank(grads)) << "NaN payload included";
}

// ---- Data-parallel training of a small force-field MLP ----

struct AtomicEnergyNetwork : torch::nn::Module {
  AtomicEnergyNetwork() {
    layers = register_module("layers",
                             torch::nn::Sequential(torch::nn::Linear(16, 32), torch::nn::SiLU(),
                                                   torch::nn::Linear(32, 32), torch::nn::SiLU(),
                                                   torch::nn::Linear(32, 1)));
  }
  torch::nn::Sequential layers{nullptr};
};

struct Batch {
  torch::Tensor positions;
  torch::Tensor reference_forces;
};

// positions -> descriptors -> MLP -> energy -> forces (autograd, graph kept for training).
struct ForceTrainingProblem {
  static constexpr int kSeed = 17;

  ForceTrainingProblem() {
    torch::manual_seed(kSeed);
    frequencies = torch::randn({3, 8}) * 0.7;
    teacher = std::make_shared<AtomicEnergyNetwork>();
  }

  // Different atom counts per rank, so the global normalisation matters.
  static int atoms_on(int rank) { return 16 + 8 * (rank % 3); }
  static int global_atoms(int ranks) {
    int atoms = 0;
    for (int rank = 0; rank < ranks; ++rank) atoms += atoms_on(rank);
    return atoms;
  }

  torch::Tensor forces(AtomicEnergyNetwork& network, const torch::Tensor& positions) const {
    const torch::Tensor x = positions.detach().requires_grad_(true);
    const torch::Tensor phases = torch::matmul(x, frequencies);
    const torch::Tensor descriptors = torch::cat({torch::sin(phases), torch::cos(phases)}, 1);
    const torch::Tensor energy = network.layers->forward(descriptors).to(torch::kFloat64).sum();
    return -torch::autograd::grad({energy}, {x}, {}, true, true)[0];
  }

  // Each rank's own random batch of this step; every rank can rebuild any rank's batch.
  Batch batch(int step, int rank) const {
    torch::manual_seed(100000 + 1000 * step + rank);
    Batch batch;
    batch.positions = torch::rand({atoms_on(rank), 3}) * 6.0;
    batch.reference_forces = forces(*teacher, batch.positions).detach();
    return batch;
  }

  // This rank's share of the global force MSE: a sum over its own atoms divided by the global
  // atom count, so the ranks' losses, and their gradients, add up to the global ones.
  torch::Tensor rank_loss(AtomicEnergyNetwork& network, int step, int rank, int ranks,
                          Precision precision) const {
    const Batch data = batch(step, rank);
    // Forward, forces and loss in the region; backward outside (autocast_region.h).
    otf::AutocastRegion region(torch::kCPU, precision);
    const torch::Tensor predicted = forces(network, data.positions).to(torch::kFloat);
    return (predicted - data.reference_forces).pow(2).sum() / (3.0 * global_atoms(ranks));
  }

  torch::Tensor frequencies;
  std::shared_ptr<AtomicEnergyNetwork> teacher;
};

constexpr double kLearningRate = 2e-3;
constexpr int kInitialisationSeed = 500;

struct TrainingRun {
  std::vector<bool> stepped;
  std::vector<double> scale;
  std::vector<double> global_loss;
  std::vector<bool> replicas_identical;  // data-parallel runs: after every step
  bool replicas_identical_after_broadcast = false;
  bool replicas_differed_before_broadcast = false;
  // The unscaled gradients each step used (empty for skipped steps).
  std::vector<std::vector<torch::Tensor>> applied_gradients;
  std::vector<torch::Tensor> final_parameters;
};

// After GradScaler::step the gradients are unscaled (also when the scaler is disabled). Forces
// do not depend on the last layer's bias: single-process training leaves its gradient undefined,
// where all_reduce_gradients gives it a zero one; both mean zero here.
std::vector<torch::Tensor> gradients_if_stepped(bool stepped,
                                                const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> gradients;
  if (stepped) {
    for (const auto& parameter : parameters) {
      gradients.push_back(parameter.grad().defined() ? parameter.grad().clone()
                                                     : torch::zeros_like(parameter));
    }
  }
  return gradients;
}

otf::GradScalerOptions scaler_options(Precision precision, double init_scale) {
  otf::GradScalerOptions options;
  options.enabled = otf::needs_grad_scaler(precision);
  options.init_scale = init_scale;
  options.growth_interval = 1000000;  // growth would make the skip pattern harder to read
  return options;
}

std::vector<torch::Tensor> adam_moments(const torch::optim::Adam& optimizer,
                                        const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> moments;
  for (const auto& parameter : parameters) {
    const auto found =
        optimizer.state().find(otf::torch_compat::optimizer_state_key(parameter));
    if (found == optimizer.state().end()) continue;
    const auto& state = static_cast<const torch::optim::AdamParamState&>(*found->second);
    moments.push_back(state.exp_avg());
    moments.push_back(state.exp_avg_sq());
  }
  return moments;
}

TrainingRun train_data_parallel(const ForceTrainingProblem& problem, Precision precision,
                                double init_scale, int steps) {
  const int rank = world().rank();
  const int ranks = world().size();
  TrainingRun run;
  torch::manual_seed(kInitialisationSeed + rank);  // every rank starts elsewhere...
  AtomicEnergyNetwork network;
  const auto parameters = network.parameters();
  run.replicas_differed_before_broadcast = !same_bytes_on_every_rank(parameters);
  otf::broadcast_parameters(world(), parameters);  // ...until rank 0's parameters reach all
  run.replicas_identical_after_broadcast = same_bytes_on_every_rank(parameters);

  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(kLearningRate));
  otf::GradScaler scaler(scaler_options(precision, init_scale));
  scaler.set_found_inf_reducer(otf::found_inf_reducer(world_communicator));
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    const torch::Tensor loss = problem.rank_loss(network, step, rank, ranks, precision);
    scaler.scale(loss).backward();
    otf::all_reduce_gradients(world(), parameters);
    run.stepped.push_back(scaler.step(optimizer));
    run.applied_gradients.push_back(gradients_if_stepped(run.stepped.back(), parameters));
    scaler.update();
    run.scale.push_back(scaler.get_scale());
    run.global_loss.push_back(world().all_reduce_sum(loss.item<double>()));
    std::vector<torch::Tensor> state = parameters;
    for (const auto& moment : adam_moments(optimizer, parameters)) state.push_back(moment);
    run.replicas_identical.push_back(same_bytes_on_every_rank(state));
  }
  run.final_parameters = clones(parameters);
  return run;
}

// The same training in one process on the union of all ranks' batches (each rank runs it).
TrainingRun train_on_the_union(const ForceTrainingProblem& problem, Precision precision,
                               double init_scale, int steps) {
  const int ranks = world().size();
  TrainingRun run;
  torch::manual_seed(kInitialisationSeed);  // rank 0's initial parameters
  AtomicEnergyNetwork network;
  const auto parameters = network.parameters();
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(kLearningRate));
  otf::GradScaler scaler(scaler_options(precision, init_scale));
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = problem.rank_loss(network, step, 0, ranks, precision);
    for (int rank = 1; rank < ranks; ++rank) {
      loss = loss + problem.rank_loss(network, step, rank, ranks, precision);
    }
    scaler.scale(loss).backward();
    run.stepped.push_back(scaler.step(optimizer));
    run.applied_gradients.push_back(gradients_if_stepped(run.stepped.back(), parameters));
    scaler.update();
    run.scale.push_back(scaler.get_scale());
    run.global_loss.push_back(loss.item<double>());
  }
  run.final_parameters = clones(parameters);
  return run;
}

int first_false(const std::vector<bool>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!values[i]) return static_cast<int>(i);
  return -1;
}

double max_abs_difference(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  double difference = a.size() == b.size() ? 0.0 : kInf;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    difference = std::max(difference, (a[i] - b[i]).abs().max().item<double>());
  return difference;
}

// Returns the data-parallel run for checks specific to a precision.
TrainingRun check_data_parallel_training(Precision precision, double init_scale, int steps) {
  const ForceTrainingProblem problem;
  const TrainingRun parallel = train_data_parallel(problem, precision, init_scale, steps);
  const TrainingRun single = train_on_the_union(problem, precision, init_scale, steps);
  const int rank = world().rank();

  if (world().size() > 1) {
    EXPECT_TRUE(parallel.replicas_differed_before_broadcast);
  }
  EXPECT_TRUE(parallel.replicas_identical_after_broadcast);
  EXPECT_EQ(first_false(parallel.replicas_identical), -1)
      << "rank " << rank << ": replicas (weights and Adam moments) differ after this step";
  // The GradScaler's decisions are those of single-process training on the union.
  EXPECT_EQ(parallel.stepped, single.stepped) << "rank " << rank;
  EXPECT_EQ(parallel.scale, single.scale) << "rank " << rank;
  // Summed gradients are the global loss' gradient up to float32 summation order.
  for (int step = 0; step < steps; ++step) {
    EXPECT_NEAR(parallel.global_loss[static_cast<size_t>(step)],
                single.global_loss[static_cast<size_t>(step)],
                1e-4 * std::abs(single.global_loss[static_cast<size_t>(step)]))
        << "rank " << rank << ", step " << step;
  }
  // The summed gradients are the gradient of the global loss (a mean instead of a sum, or a
  // wrong normalisation, would show here; Adam's update is nearly blind to a common factor).
  for (int step = 0; step < steps; ++step) {
    const auto& parallel_gradients = parallel.applied_gradients[static_cast<size_t>(step)];
    const auto& single_gradients = single.applied_gradients[static_cast<size_t>(step)];
    if (parallel_gradients.empty() || single_gradients.empty()) continue;
    double largest = 0.0;
    for (const auto& gradient : single_gradients)
      largest = std::max(largest, gradient.abs().max().item<double>());
    EXPECT_LE(max_abs_difference(parallel_gradients, single_gradients), 1e-5 * largest)
        << "rank " << rank << ", step " << step;
  }
  const double weight_difference =
      max_abs_difference(parallel.final_parameters, single.final_parameters);
  // Only float32 summation order differs (none with one or two ranks: a + b == b + a). Adam
  // moves each weight by about the learning rate per step, whatever the gradient's size.
  EXPECT_LT(weight_difference, 1e-3 * kLearningRate) << "rank " << rank;
  EXPECT_LT(parallel.global_loss.back(), parallel.global_loss.front()) << "rank " << rank;
  if (rank == 0) {
    int skipped = 0;
    for (const bool stepped : parallel.stepped) skipped += stepped ? 0 : 1;
    std::printf(
        "[ %s ] %d ranks, %d steps, %d skipped; scale %g; loss %.5g -> %.5g; "
        "max |w_parallel - w_single| = %.3g\n",
        otf::to_string(precision).c_str(), world().size(), steps, skipped, parallel.scale.back(),
        parallel.global_loss.front(), parallel.global_loss.back(), weight_difference);
  }
  return parallel;
}

TEST(DataParallelTraining, Float32ReplicasStayBitwiseIdenticalAndMatchSingleProcessTraining) {
  check_data_parallel_training(Precision::Float32, 1.0, 20);
}

TEST(DataParallelTraining, EmulatedFloat16SkipsOverflowsTogetherAndMatchesSingleProcessTraining) {
  const TrainingRun run = check_data_parallel_training(Precision::Float16, std::ldexp(1.0, 30), 30);
  // The first steps overflow fp16 (max 65504) at this scale and are skipped on every rank
  // (replicas_identical above covers "together").
  EXPECT_FALSE(run.stepped.front()) << "2^30 times O(1) gradients must overflow emulated fp16";
  EXPECT_TRUE(run.stepped.back()) << "training never proceeded";
}

// ---- The engine's TrainingStrategy, data-parallel through the MPI communicator ----

struct StrategyNetwork : torch::nn::Module {
  StrategyNetwork() {
    layers = register_module("layers", torch::nn::Sequential(torch::nn::Linear(3, 16),
                                                             torch::nn::SiLU(),
                                                             torch::nn::Linear(16, 1)));
  }
  torch::nn::Sequential layers{nullptr};
};

TEST(DataParallelTraining, StrategyWithFloat16HookKeepsReplicasBitwiseIdenticalEveryStep) {
  const int rank = world().rank();
  // Different initial weights on every rank: broadcast_parameters must make them equal.
  torch::manual_seed(static_cast<uint64_t>(100 + rank));
  otf::TrainingStrategyOptions options;
  options.models["main"] = std::make_shared<StrategyNetwork>();
  options.training_fn = [](const otf::NamedModels& models, const otf::TrainingBatch& batch) {
    auto& network = *models.at("main")->as<StrategyNetwork>();
    const auto positions = batch.at("positions").detach().requires_grad_(true);
    const auto energy = network.layers->forward(positions).to(torch::kFloat64).sum();
    const auto forces = -torch::autograd::grad({energy}, {positions}, {}, true, true)[0];
    return otf::Predictions{{"forces", forces}};
  };
  options.loss_fn = [](const otf::Predictions& predictions, const otf::TrainingBatch& batch,
                       int64_t, int64_t) {
    otf::LossOutput out;
    // Sum over this rank's atoms divided by the global count: the rank losses add up to the
    // loss of the union, so summed gradients are its gradient.
    const auto residual = predictions.at("forces").to(torch::kFloat32) - batch.at("forces");
    out.total_loss = residual.pow(2).sum() / batch.at("global_components");
    out.per_component_unweighted["forces"] = out.total_loss;
    out.per_component_weight["forces"] = 1.0;
    return out;
  };
  otf::OptimizerConfig optimizer;
  optimizer.make_optimizer = [](std::vector<torch::Tensor> parameters) {
    return std::make_unique<torch::optim::Adam>(std::move(parameters),
                                                torch::optim::AdamOptions(1e-2));
  };
  options.optimizer_configs = {optimizer};
  options.hooks = {std::make_shared<otf::MixedPrecisionHook>(
      Precision::Float16, scaler_options(Precision::Float16, std::ldexp(1.0, 28)))};
  otf::TrainingStrategy strategy(std::move(options));
  strategy.set_communicator(world_communicator);
  auto& model = *strategy.models().at("main");
  otf::broadcast_parameters(world(), model.parameters());
  EXPECT_TRUE(same_bytes_on_every_rank(model.parameters()));

  // Each rank its own atoms.
  torch::manual_seed(static_cast<uint64_t>(7 + rank));
  const auto positions = torch::randn({24, 3});
  const double global_components = 24.0 * 3.0 * world().size();
  const otf::TrainingBatch batch({{"positions", positions},
                                  {"forces", -1.5 * positions},
                                  {"global_components", torch::tensor(global_components)}});
  otf::TrainingStrategy::Scope scope(strategy);
  int identical_steps = 0, executed = 0, skipped = 0;
  for (int step = 0; step < 25; ++step) {
    const bool ran = strategy.train_batch(batch);
    executed += ran ? 1 : 0;
    skipped += ran ? 0 : 1;
    identical_steps += same_bytes_on_every_rank(model.parameters()) ? 1 : 0;
    EXPECT_TRUE(on_every_rank(ran) == !on_every_rank(!ran)) << "ranks disagreed on the skip";
  }
  EXPECT_EQ(identical_steps, 25);
  EXPECT_GT(skipped, 0) << "2^28 times O(1) force gradients must overflow emulated fp16";
  EXPECT_GT(executed, 0);
  EXPECT_EQ(strategy.counters().global_step_count, executed * world().size());
  EXPECT_TRUE(same_on_every_rank(strategy.grad_scaler()->get_scale()));
  if (rank == 0)
    std::printf("[ strategy ] %d ranks: 25 batches, %d skipped together, replicas identical\n",
                world().size(), skipped);
}

// ---- main: MPI around GoogleTest ----

// Ranks other than 0 print only their failures, prefixed with their rank, so the log shows which
// rank failed without every rank repeating the whole report.
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   result.file_name() ? result.file_name() : "?", result.line_number(),
                   result.message());
    }
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

 private:
  int rank_;
};

// Stops the job when the ranks would run different tests (filters, shuffling, repeats differ):
// their collectives would not match and the job would hang.
class SameTestsOnEveryRankCheck : public testing::EmptyTestEventListener {
 public:
  void OnTestIterationStart(const testing::UnitTest& unit_test, int /*iteration*/) override {
    std::string order;
    for (int i = 0; i < unit_test.total_test_suite_count(); ++i) {
      const testing::TestSuite& suite = *unit_test.GetTestSuite(i);
      for (int j = 0; j < suite.total_test_count(); ++j) {
        const testing::TestInfo& info = *suite.GetTestInfo(j);
        if (info.should_run())
          order += std::string(info.test_suite_name()) + "." + info.name() + ";";
      }
    }
    const torch::Tensor order_bytes =
        torch::from_blob(order.data(), {static_cast<int64_t>(order.size())}, torch::kByte);
    if (!same_bytes_on_every_rank({order_bytes})) {
      std::fprintf(stderr,
                   "The ranks would run different tests (pass the same --gtest_* flags "
                   "to every rank); aborting.\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Ranks share the machine's cores; intra-op threads would oversubscribe them.
  torch::set_num_threads(1);

  testing::InitGoogleTest(&argc, argv);
  // An exception escaping a test on one rank would let that rank run on into the next test's
  // collectives while the others still wait in this one's. Uncaught, it aborts the process and
  // mpiexec ends the whole job with a non-zero status instead. (EXPECT_THROW still catches.)
  GTEST_FLAG_SET(catch_exceptions, false);
  // --gtest_shuffle without a seed picks one from the clock: take rank 0's on every rank.
  int random_seed = GTEST_FLAG_GET(random_seed);
  if (rank == 0 && random_seed == 0) {
    random_seed =
        static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() % 99999 + 1);
  }
  MPI_Bcast(&random_seed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  GTEST_FLAG_SET(random_seed, random_seed);

  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));  // GoogleTest owns appended listeners
  }
  listeners.Append(new SameTestsOnEveryRankCheck);

  world_communicator = std::make_shared<otf::MpiCommunicator>(MPI_COMM_WORLD);
  const int local_result = RUN_ALL_TESTS();
  world_communicator.reset();

  // Every rank reports failure when any rank failed.
  int job_result = local_result;
  MPI_Allreduce(&local_result, &job_result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && local_result == 0 && job_result != 0) {
    std::fprintf(stderr, "Tests failed on another rank: see the [rank N] lines above.\n");
  }
  MPI_Finalize();
  return job_result;
}

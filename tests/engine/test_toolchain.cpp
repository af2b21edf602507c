// The toolchain the whole project stands on: LibTorch computes and differentiates, and a Kokkos
// kernel (Debian's Trilinos Kokkos, Serial backend) runs and agrees with LibTorch.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "build_info.h"

namespace {

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { Kokkos::initialize(); }
  void TearDown() override { Kokkos::finalize(); }
};
const auto* const kokkos_environment =
    ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);  // gtest takes ownership

TEST(Toolchain, LibTorchMatrixProductAndGradient) {
  const auto x = torch::arange(1.0, 7.0, torch::kFloat64).reshape({2, 3}).requires_grad_();
  const auto w = torch::ones({3, 2}, torch::kFloat64);
  const auto y = torch::matmul(x, w).pow(2).sum();  // rows sum to 6 and 15 -> 2*(36+225)
  EXPECT_DOUBLE_EQ(y.item<double>(), 522.0);
  y.backward();
  // d/dx of sum_j (sum_k x_ik)^2 over 2 columns = 4 * row sum
  const auto expected = torch::tensor({{24.0, 24.0, 24.0}, {60.0, 60.0, 60.0}}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(x.grad(), expected)) << x.grad();
}

TEST(Toolchain, KokkosReductionMatchesLibTorch) {
  constexpr int n = 1000;
  Kokkos::View<double*> values("values", n);
  Kokkos::parallel_for(
      "fill", n, KOKKOS_LAMBDA(const int i) { values(i) = 0.5 * i; });
  double kokkos_sum = 0.0;
  Kokkos::parallel_reduce(
      "sum", n, KOKKOS_LAMBDA(const int i, double& partial) { partial += values(i); },
      kokkos_sum);

  // Same numbers through LibTorch, reading the Kokkos host view without a copy.
  const auto as_tensor = torch::from_blob(values.data(), {n}, torch::kFloat64);
  EXPECT_DOUBLE_EQ(kokkos_sum, as_tensor.sum().item<double>());
  EXPECT_DOUBLE_EQ(kokkos_sum, 0.5 * n * (n - 1) / 2.0);
}

TEST(Toolchain, SelfCheckUsedByOtfInfo) {
  EXPECT_DOUBLE_EQ(otf::torch_self_check(0), 64.0);
  EXPECT_DOUBLE_EQ(otf::torch_self_check(3), 256.0);
  EXPECT_FALSE(otf::build_info().torch_version.empty());
}

}  // namespace

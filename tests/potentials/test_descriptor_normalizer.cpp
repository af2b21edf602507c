// The descriptor standardisation cannot blow up: a feature that is exactly zero in the first frames
// (as symmetry makes some angular features of a perfect crystal) gets a scale floored by the
// element's other features, so a small displacement later is an input of order one, not 1e4.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "descriptor_normalizer.h"

namespace otf {
namespace {

TEST(DescriptorNormalizer, AFeatureThatIsZeroInTheFirstFramesStaysOfOrderOne) {
  DescriptorNormalizer normalizer(1, 3, torch::kFloat64);
  torch::manual_seed(4);
  // 64 atoms: feature 0 exactly zero, features 1 and 2 of order one.
  torch::Tensor features = torch::randn({64, 3}, torch::kFloat64);
  features.select(1, 0).zero_();
  const torch::Tensor species = torch::zeros({64}, torch::kInt64);
  normalizer.accumulate(normalizer.moments(features, species));
  normalizer.freeze();

  torch::Tensor displaced = torch::zeros({1, 3}, torch::kFloat64);
  displaced[0][0] = 0.01;    // the first thermal displacement
  const double input = normalizer.forward(displaced, torch::zeros({1}, torch::kInt64))[0][0]
                           .item<double>();
  // 1% of the element's feature RMS (about 0.8 here) floors the scale: 0.01 / 0.008 ~ 1.2.
  EXPECT_LT(std::abs(input), 2.0);
  EXPECT_GT(std::abs(input), 0.5);
  // A feature with its own spread is standardised by it (the floor adds well under 1%).
  const torch::Tensor standardised = normalizer.forward(features, species);
  EXPECT_NEAR(standardised.select(1, 1).std(false).item<double>(), 1.0, 0.01);
}

TEST(DescriptorNormalizer, ASmallFeatureWithItsOwnSpreadKeepsItsOwnScale) {
  DescriptorNormalizer normalizer(1, 3, torch::kFloat64);
  torch::manual_seed(5);
  torch::Tensor features = torch::randn({64, 3}, torch::kFloat64);
  features.select(1, 0).mul_(1e-4);    // small, but real signal
  const torch::Tensor species = torch::zeros({64}, torch::kInt64);
  normalizer.accumulate(normalizer.moments(features, species));
  const torch::Tensor standardised = normalizer.forward(features, species);
  EXPECT_NEAR(standardised.select(1, 0).std(false).item<double>(), 1.0, 0.01);
}

}  // namespace
}  // namespace otf

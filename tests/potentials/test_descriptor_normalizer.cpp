// The descriptor standardisation cannot blow up: a feature that is exactly zero in the first frames
// (as symmetry makes some angular features of a perfect crystal) gets a scale floored by the
// element's other features, so a small displacement later is an input of order one, not 1e4.
// And it says how much wider than the statistics a new frame spreads (the statistics phase goes on
// while the first frames are not representative).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

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

TEST(DescriptorNormalizer, SpreadRatioIsOneForFramesLikeThoseSeenAndLargerForWiderOnes) {
  DescriptorNormalizer normalizer(2, 4, torch::kFloat64);
  torch::manual_seed(6);
  const torch::Tensor species = torch::cat({torch::zeros({32}, torch::kInt64),
                                            torch::ones({32}, torch::kInt64)});
  const auto frame = [&](double width) {
    return normalizer.moments(width * torch::randn({64, 4}, torch::kFloat64) + 3.0, species);
  };
  // Nothing seen yet: no frame can be judged representative.
  EXPECT_TRUE(std::isinf(normalizer.spread_ratio(frame(1.0))));
  for (int k = 0; k < 20; ++k) normalizer.accumulate(frame(1.0));
  EXPECT_NEAR(normalizer.spread_ratio(frame(1.0)), 1.0, 0.15);
  EXPECT_NEAR(normalizer.spread_ratio(frame(3.0)), 3.0, 0.4);
  EXPECT_LT(normalizer.spread_ratio(frame(0.2)), 0.5);
  // A frame shifted by two standard deviations is as far out as a twice as wide one.
  const DescriptorMoments shifted =
      normalizer.moments(torch::randn({64, 4}, torch::kFloat64) + 5.0, species);
  EXPECT_NEAR(normalizer.spread_ratio(shifted), std::sqrt(5.0), 0.4);
  // A frozen normaliser still judges frames; its statistics do not change.
  normalizer.freeze();
  const double before = normalizer.spread_ratio(shifted);
  normalizer.accumulate(frame(3.0));
  EXPECT_DOUBLE_EQ(normalizer.spread_ratio(shifted), before);
}

TEST(DescriptorNormalizer, ASpeciesNotSeenYetMakesAFrameUnrepresentative) {
  DescriptorNormalizer normalizer(2, 3, torch::kFloat64);
  torch::manual_seed(7);
  const torch::Tensor only_first = torch::zeros({16}, torch::kInt64);
  normalizer.accumulate(normalizer.moments(torch::randn({16, 3}, torch::kFloat64), only_first));
  const torch::Tensor both = torch::cat({torch::zeros({8}, torch::kInt64),
                                         torch::ones({8}, torch::kInt64)});
  EXPECT_TRUE(std::isinf(
      normalizer.spread_ratio(normalizer.moments(torch::randn({16, 3}, torch::kFloat64), both))));
  EXPECT_TRUE(std::isfinite(normalizer.spread_ratio(
      normalizer.moments(torch::randn({16, 3}, torch::kFloat64), only_first))));
}

}  // namespace
}  // namespace otf

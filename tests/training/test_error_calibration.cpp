// The calibration of the committee's spread (training/error_calibration.h): scale factors, the
// per-atom error bound, the window, Spearman's rank correlation and the restart encoding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "error_calibration.h"

namespace otf {
namespace {

LabelErrorSample sample(std::vector<double> spread, std::vector<double> error,
                        double energy_spread = 0.0, double energy_error = 0.0) {
  LabelErrorSample s;
  s.force_spread = std::move(spread);
  s.force_error = std::move(error);
  s.energy_spread = energy_spread;
  s.energy_error = energy_error;
  return s;
}

TEST(ErrorCalibration, WithoutSamplesTheSpreadIsTakenAsTheError) {
  const ErrorCalibration calibration;
  EXPECT_EQ(calibration.force_scale(), 1.0);
  EXPECT_EQ(calibration.energy_scale(), 1.0);
  EXPECT_DOUBLE_EQ(calibration.predicted_force_rmse(3.0 * 0.04), 0.2);
  EXPECT_EQ(calibration.force_bound_factor(0.9), 0.0);
}

TEST(ErrorCalibration, ScalesAreRatiosOfRootMeanSquares) {
  ErrorCalibration calibration;
  calibration.add(sample({0.1, 0.2}, {0.2, 0.4}, 0.001, 0.003));
  calibration.add(sample({0.3}, {0.6}, 0.002, 0.006));
  EXPECT_NEAR(calibration.force_scale(), 2.0, 1e-12);
  EXPECT_NEAR(calibration.energy_scale(), 3.0, 1e-12);
  // A frame whose atoms' squared spreads average 0.03: per component 2 x sqrt(0.03 / 3).
  EXPECT_NEAR(calibration.predicted_force_rmse(0.03), 0.2, 1e-12);
  EXPECT_NEAR(calibration.predicted_energy_error(0.001), 0.003, 1e-12);
}

// Each label counts once, whatever the size of its committee spread: a label taken where the
// committee disagreed 100x more than on the others (its error half its spread) does not hide that
// the others' errors are 3x theirs. (As one ratio of sums over all atoms the scale was 0.5.)
TEST(ErrorCalibration, OneLabelOfAWildlyDisagreeingCommitteeDoesNotSetTheScale) {
  ErrorCalibration calibration;
  calibration.add(sample({10.0, 10.0}, {5.0, 5.0}, 1.0, 0.5));
  for (int label = 0; label < 6; ++label)
    calibration.add(sample({0.1, 0.1}, {0.3, 0.3}, 0.001, 0.003));
  EXPECT_NEAR(calibration.force_scale(), 3.0, 1e-12);
  EXPECT_NEAR(calibration.energy_scale(), 3.0, 1e-12);
  // A posterior's spread is one error estimate throughout: its scale pools all atoms (here the
  // wild label's errors are twice its spread, the others' three times theirs).
  ErrorCalibration posterior(40, true);
  posterior.add(sample({10.0, 10.0}, {20.0, 20.0}));
  for (int label = 0; label < 6; ++label) posterior.add(sample({0.1, 0.1}, {0.3, 0.3}));
  EXPECT_NEAR(posterior.force_scale(), std::sqrt((800.0 + 6 * 0.18) / (200.0 + 6 * 0.02)), 1e-12);
  // Labels whose forces are all zero, predicted so (a perfect lattice), say nothing.
  ErrorCalibration lattice;
  lattice.add(sample({0.0, 0.0}, {0.0, 0.0}));
  EXPECT_EQ(lattice.force_scale(), 1.0);
  lattice.add(sample({0.1, 0.1}, {0.2, 0.2}));
  EXPECT_NEAR(lattice.force_scale(), 2.0, 1e-12);
  // An even count takes the mean of the middle two ratios of squares: (4 + 16) / 2.
  lattice.add(sample({0.1}, {0.4}));
  lattice.add(sample({0.1}, {0.1}));
  lattice.add(sample({0.1}, {0.5}));
  EXPECT_NEAR(lattice.force_scale(), std::sqrt(10.0), 1e-12);
}

TEST(ErrorCalibration, TheBoundCoversTheAskedFractionOfAtoms) {
  ErrorCalibration calibration(1000);
  std::mt19937 generator(3);
  std::lognormal_distribution<double> spread_of(-2.0, 1.0);
  std::normal_distribution<double> unit(0.0, 1.0);
  std::vector<double> ratios;
  for (int label = 0; label < 50; ++label) {
    std::vector<double> spread, error;
    for (int atom = 0; atom < 64; ++atom) {
      spread.push_back(spread_of(generator));
      error.push_back(std::abs(1.5 * spread.back() * unit(generator)));
    }
    calibration.add(sample(spread, error));
  }
  const double q90 = calibration.force_bound_factor(0.9);
  // |N(0, 1.5^2)| has its 90% quantile at 1.5 x 1.645.
  EXPECT_NEAR(q90, 1.5 * 1.645, 0.15);
  EXPECT_GT(calibration.force_rank_correlation(), 0.5);
  EXPECT_GE(calibration.force_bound_factor(1.0), q90);
}

TEST(ErrorCalibration, TheBoundLevelAdaptsToTheCoverageItHad) {
  ErrorCalibration calibration;
  std::vector<double> spread, error;
  for (int atom = 1; atom <= 100; ++atom) {
    spread.push_back(1.0);
    error.push_back(0.01 * atom);   // ratios 0.01 ... 1.00
  }
  calibration.add(sample(spread, error));
  EXPECT_DOUBLE_EQ(calibration.bound_level(), 0.9);
  EXPECT_NEAR(calibration.force_bound90_factor(), 0.90, 1e-12);
  // Labels whose atoms exceeded the bound more often than 10% raise the level (and the bound).
  // (The level aims at 8% misses: 0.9 + 0.5 x (0.18 - 0.08).)
  calibration.record_bound_outcome(0.18);
  EXPECT_NEAR(calibration.bound_level(), 0.95, 1e-12);
  EXPECT_NEAR(calibration.force_bound90_factor(), 0.95, 1e-12);
  calibration.record_bound_outcome(0.0);
  calibration.record_bound_outcome(0.0);
  EXPECT_NEAR(calibration.bound_level(), 0.87, 1e-12);
  calibration.record_bound_outcome(0.08);
  EXPECT_NEAR(calibration.bound_level(), 0.87, 1e-12) << "8% misses keep the level";
  for (int k = 0; k < 100; ++k) calibration.record_bound_outcome(1.0);
  EXPECT_DOUBLE_EQ(calibration.bound_level(), 0.999);
  for (int k = 0; k < 100; ++k) calibration.record_bound_outcome(0.0);
  EXPECT_DOUBLE_EQ(calibration.bound_level(), 0.5);
}

TEST(ErrorCalibration, OnlyTheWindowCounts) {
  ErrorCalibration calibration(2);
  calibration.add(sample({1.0}, {10.0}));
  calibration.add(sample({1.0}, {1.0}));
  calibration.add(sample({1.0}, {1.0}));
  EXPECT_EQ(calibration.samples(), 2);
  EXPECT_NEAR(calibration.force_scale(), 1.0, 1e-12);
  EXPECT_THROW(ErrorCalibration(0), std::invalid_argument);
  EXPECT_THROW(calibration.add(sample({1.0, 2.0}, {1.0})), std::invalid_argument);
}

// The calibration describes the model as it is: a sample predicted by a model with fewer than half
// the labels of the newest sample's model is dropped (a two-label model's 10x over-confidence must
// not inflate a twenty-label model's predicted errors).
TEST(ErrorCalibration, SamplesOfAModelWithUnderHalfTheLabelsAreDropped) {
  ErrorCalibration calibration(40);
  LabelErrorSample early = sample({1.0}, {10.0});
  early.model_labels = 2;
  calibration.add(early);
  for (int64_t labels = 3; labels <= 4; ++labels) {
    LabelErrorSample later = sample({1.0}, {labels == 3 ? 10.0 : 1.0});
    later.model_labels = labels;
    calibration.add(later);
  }
  EXPECT_EQ(calibration.samples(), 3) << "4 labels is not more than twice 2";
  EXPECT_NEAR(calibration.force_scale(), 10.0, 1e-12) << "the median of 10, 10 and 1";
  LabelErrorSample newest = sample({1.0}, {1.0});
  newest.model_labels = 5;
  calibration.add(newest);
  EXPECT_EQ(calibration.samples(), 3);
  EXPECT_NEAR(calibration.force_scale(), 1.0, 1e-12);
}

TEST(ErrorCalibration, EncodesAndDecodesExactly) {
  ErrorCalibration calibration(5);
  calibration.add(sample({0.1, 0.25, 0.3}, {0.05, 0.5, 0.31}, 1e-3, 2e-3));
  calibration.add(sample({0.7}, {0.9}, 4e-3, 1e-4));
  calibration.record_bound_outcome(0.3);
  const std::string bytes = calibration.encode();
  ErrorCalibration restored(5);
  restored.decode(bytes);
  EXPECT_EQ(restored.samples(), 2);
  EXPECT_EQ(restored.encode(), bytes);
  EXPECT_EQ(restored.force_scale(), calibration.force_scale());
  EXPECT_EQ(restored.energy_scale(), calibration.energy_scale());
  EXPECT_EQ(restored.bound_level(), calibration.bound_level());
  EXPECT_THROW(restored.decode(bytes.substr(0, bytes.size() - 3)), std::runtime_error);
  EXPECT_THROW(restored.decode(bytes + "x"), std::runtime_error);
  EXPECT_EQ(restored.samples(), 2) << "a failed decode leaves the calibration as it was";
}

TEST(ErrorCalibration, TheSamplesModelLabelsAreRestored) {
  ErrorCalibration calibration(5);
  for (int64_t labels : {6, 9}) {
    LabelErrorSample s = sample({1.0}, {3.0});
    s.model_labels = labels;
    calibration.add(s);
  }
  ErrorCalibration restored(5);
  restored.decode(calibration.encode());
  restored.decode_model_labels(calibration.encode_model_labels());
  EXPECT_EQ(restored.encode_model_labels(), calibration.encode_model_labels());
  // Restored: a sample of a 13-label model drops the 6-label one, as it would have without the
  // restart.
  LabelErrorSample next = sample({1.0}, {1.0});
  next.model_labels = 13;
  restored.add(next);
  calibration.add(next);
  EXPECT_EQ(restored.samples(), 2);
  EXPECT_EQ(restored.force_scale(), calibration.force_scale());
  // A file from before the counts were kept: every sample counts as of a model with 0 labels.
  ErrorCalibration old(5);
  old.decode(calibration.encode());
  old.decode_model_labels("");
  EXPECT_EQ(old.samples(), 2);
  EXPECT_THROW(old.decode_model_labels(std::string(3, 'x')), std::runtime_error);
}

TEST(SpearmanRankCorrelation, RanksWithTiesAndDegenerateSeries) {
  EXPECT_NEAR(spearman_rank_correlation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(spearman_rank_correlation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
  // Monotone but not linear: still 1.
  EXPECT_NEAR(spearman_rank_correlation({1, 2, 3, 4}, {1, 8, 27, 1000}), 1.0, 1e-12);
  // Ties get average ranks: ranks (0.5, 0.5, 2) and (0, 1, 2).
  EXPECT_NEAR(spearman_rank_correlation({1, 1, 2}, {1, 2, 3}), 0.8660254037844386, 1e-12);
  EXPECT_EQ(spearman_rank_correlation({1}, {2}), 0.0);
  EXPECT_EQ(spearman_rank_correlation({1, 1, 1}, {1, 2, 3}), 0.0);
  EXPECT_THROW(spearman_rank_correlation({1, 2}, {1}), std::invalid_argument);
}

}  // namespace
}  // namespace otf

// The Bayesian descriptor regression (potentials/bayesian_descriptor_regression.h): its force rows
// are the derivatives of its energy, a target inside its model class is recovered from one frame,
// a smooth pair potential outside it is learned from a few frames with an uncertainty that covers
// the errors and shrinks with data, and bad options and labels are refused by name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "bayesian_descriptor_regression.h"
#include "neighbor_graph.h"
#include "periodic_system.h"
#include "potential_test_support.h"

namespace otf {
namespace {

ThreeBodyDescriptorOptions small_descriptor() {
  ThreeBodyDescriptorOptions options;
  options.num_species = 1;
  options.cutoff = 4.0;
  options.radial_functions = 6;
  options.angular_radial_functions = 3;
  options.max_angular_order = 2;
  return options;
}

PeriodicConfiguration jittered_diamond(uint64_t seed, double jitter = 0.15) {
  return diamond_crystal(2, 5.431, jitter, seed);
}

// Morse energy of the owned atoms and forces folded onto them.
std::pair<double, torch::Tensor> morse(const PeriodicConfiguration& configuration, double cutoff) {
  const PeriodicSystem system(configuration, cutoff);
  const NeighborGraph graph = neighbor_graph_from_view(system.view(), cutoff);
  const testing::MorseLabels labels = testing::morse_labels(graph, cutoff);
  const auto flat = labels.forces.contiguous();
  std::vector<double> per_atom(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  const std::vector<double> folded = system.fold_onto_owners(per_atom);
  return {labels.energy, torch::tensor(folded, torch::kFloat64).view({-1, 3})};
}

TEST(BayesianDescriptorRegression, ForceRowsAreMinusTheEnergyGradient) {
  BayesianRegressionOptions options;
  options.degree = 2;
  BayesianDescriptorRegression model(small_descriptor(), options);
  const PeriodicConfiguration first = jittered_diamond(1);
  const auto [energy, forces] = morse(first, 4.0);
  model.add_frame(first, energy, forces);
  model.fit();  // fixes the standardisation the rows use

  torch::manual_seed(3);
  const torch::Tensor weights = torch::randn({model.num_parameters()}, torch::kFloat64);
  const PeriodicConfiguration probe = jittered_diamond(2);
  const RegressionRows rows = model.rows(model.describe(probe));
  const torch::Tensor forces_from_rows = rows.force_rows.mv(weights).view({-1, 3});
  const double step = 1e-5;
  for (const int atom : {0, 5, 13}) {
    for (int axis = 0; axis < 3; ++axis) {
      PeriodicConfiguration plus = probe, minus = probe;
      plus.positions[static_cast<size_t>(atom * 3 + axis)] += step;
      minus.positions[static_cast<size_t>(atom * 3 + axis)] -= step;
      const double e_plus = model.rows(model.describe(plus)).energy_row.dot(weights).item<double>();
      const double e_minus =
          model.rows(model.describe(minus)).energy_row.dot(weights).item<double>();
      const double numeric = -(e_plus - e_minus) / (2 * step);
      const double analytic = forces_from_rows[atom][axis].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-5 * std::max(1.0, std::abs(numeric)))
          << "atom " << atom << " axis " << axis;
    }
  }
}

TEST(BayesianDescriptorRegression, RecoversATargetInsideItsModelClassFromOneFrame) {
  // E = sum_c v . d_c + 3.1 per atom: linear in the raw descriptor, so degree 1 can represent it.
  BayesianRegressionOptions options;
  options.degree = 1;
  BayesianDescriptorRegression model(small_descriptor(), options);
  torch::manual_seed(11);
  const DescriptorFrame probe_frame = model.describe(jittered_diamond(5));
  const torch::Tensor direction =
      torch::randn({probe_frame.features.size(1)}, torch::kFloat64) * 0.05;
  auto target = [&](const DescriptorFrame& frame) {
    const double energy =
        frame.features.mv(direction).sum().item<double>() + 3.1 * frame.features.size(0);
    const torch::Tensor forces =
        -(frame.feature_gradients * direction.view({1, -1, 1, 1})).sum({0, 1});  // [atoms, 3]
    return std::make_pair(energy, forces);
  };
  const PeriodicConfiguration training = jittered_diamond(4);
  const auto [energy, forces] = target(model.describe(training));
  model.add_frame(training, energy, forces);
  model.fit();

  const PeriodicConfiguration held_out = jittered_diamond(5);
  const auto [true_energy, true_forces] = target(model.describe(held_out));
  const RegressionPrediction prediction = model.predict(held_out);
  const double rms_force = true_forces.pow(2).mean().sqrt().item<double>();
  const double force_error = (prediction.forces - true_forces).pow(2).mean().sqrt().item<double>();
  EXPECT_GT(rms_force, 0.05);
  EXPECT_LT(force_error, 1e-3 * rms_force);
  EXPECT_NEAR(prediction.energy / 64.0, true_energy / 64.0, 1e-4);
}

TEST(BayesianDescriptorRegression, LearnsAPairPotentialFromAFewFramesWithAnHonestUncertainty) {
  BayesianDescriptorRegression model(small_descriptor(), BayesianRegressionOptions{});
  const PeriodicConfiguration held_out = jittered_diamond(50, 0.2);
  const auto [true_energy, true_forces] = morse(held_out, 4.0);
  const double rms_force = true_forces.pow(2).mean().sqrt().item<double>();

  std::vector<double> errors, spreads;
  for (uint64_t seed = 20; seed < 23; ++seed) {
    const PeriodicConfiguration frame = jittered_diamond(seed, 0.2);
    const auto [energy, forces] = morse(frame, 4.0);
    model.add_frame(frame, energy, forces);
    model.fit();
    const RegressionPrediction prediction = model.predict(held_out);
    errors.push_back((prediction.forces - true_forces).pow(2).mean().sqrt().item<double>());
    spreads.push_back(prediction.force_std.pow(2).mean().sqrt().item<double>());
    EXPECT_TRUE(torch::isfinite(prediction.force_std).all().item<bool>());
  }
  // Morse is a pair potential: inside the span of the radial features up to the basis error.
  EXPECT_LT(errors.back(), 0.05 * rms_force) << "rms force " << rms_force;
  EXPECT_LT(std::abs(model.predict(held_out).energy - true_energy) / 64.0, 2e-3);
  // The MD path (one backward pass) gives the posterior mean of the rows' path.
  const RegressionPrediction full = model.predict(held_out);
  const RegressionPrediction mean_only = model.mean_energy_and_forces(held_out);
  EXPECT_NEAR(mean_only.energy, full.energy, 1e-9 * std::abs(full.energy));
  EXPECT_LT((mean_only.forces - full.forces).abs().max().item<double>(), 1e-9);
  // The posterior shrinks with data, and the predictive spread (posterior + noise) is of the
  // size of the error, not orders of magnitude off.
  EXPECT_LT(spreads.back(), spreads.front());
  const double predictive =
      std::sqrt(spreads.back() * spreads.back() + std::pow(model.force_noise(), 2));
  EXPECT_GT(predictive, 0.2 * errors.back());
  EXPECT_LT(predictive, 5.0 * errors.back());
}

TEST(BayesianDescriptorRegression, RefusesBadOptionsAndLabelsByName) {
  BayesianRegressionOptions options;
  options.degree = 3;
  try {
    BayesianDescriptorRegression model(small_descriptor(), options);
    FAIL() << "degree 3 accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("degree must be 1 or 2"), std::string::npos)
        << error.what();
  }
  options.degree = 1;
  options.energy_length = -1.0;
  EXPECT_THROW(BayesianDescriptorRegression(small_descriptor(), options), std::invalid_argument);

  BayesianDescriptorRegression model(small_descriptor(), BayesianRegressionOptions{});
  EXPECT_THROW(model.fit(), std::logic_error);
  const PeriodicConfiguration frame = jittered_diamond(1);
  try {
    model.add_frame(frame, -300.0, torch::zeros({10, 3}, torch::kFloat64));
    FAIL() << "wrong force count accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("forces must be [64, 3]"), std::string::npos)
        << error.what();
  }
  torch::Tensor forces = torch::zeros({64, 3}, torch::kFloat64);
  forces[3][1] = std::nan("");
  EXPECT_THROW(model.add_frame(frame, -300.0, forces), std::invalid_argument);
  EXPECT_EQ(model.num_frames(), 0);
}

}  // namespace
}  // namespace otf

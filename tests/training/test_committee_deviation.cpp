// The committee's uncertainty formula and its whole-frame summary against hand computations, and
// the training session's per-atom force uncertainty against the same formula applied to the
// members' own forces.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "committee_deviation.h"
#include "frame_intake.h"
#include "training_test_support.h"

namespace otf::testing {
namespace {

TEST(CommitteeDeviation, ScalarValuesByHand) {
  // Members 1, 2, 6 -> mean 3, squared deviations 4, 1, 9 -> sqrt(14/3).
  const torch::Tensor members = torch::tensor({{1.0, 5.0}, {2.0, 5.0}, {6.0, 5.0}}, torch::kFloat64);
  const torch::Tensor deviation = committee_deviation(members);
  EXPECT_NEAR(deviation[0].item<double>(), std::sqrt(14.0 / 3.0), 1e-15);
  EXPECT_EQ(deviation[1].item<double>(), 0.0);
}

TEST(CommitteeDeviation, ForceVectorsByHand) {
  // Two members on two atoms. Atom 0: (1,0,0) and (3,0,0) -> mean (2,0,0), |d|^2 = 1, 1 -> 1.
  // Atom 1: (0,1,2) and (0,-1,0) -> mean (0,0,1), |d|^2 = 1+1, 1+1 -> sqrt(2).
  const torch::Tensor members = torch::tensor(
      {{{1.0, 0.0, 0.0}, {0.0, 1.0, 2.0}}, {{3.0, 0.0, 0.0}, {0.0, -1.0, 0.0}}}, torch::kFloat64);
  const torch::Tensor deviation = committee_vector_deviation(members);
  ASSERT_EQ(deviation.sizes(), torch::IntArrayRef({2}));
  EXPECT_NEAR(deviation[0].item<double>(), 1.0, 1e-15);
  EXPECT_NEAR(deviation[1].item<double>(), std::sqrt(2.0), 1e-15);
  // One member: no spread.
  EXPECT_EQ(committee_vector_deviation(members.narrow(0, 0, 1)).abs().max().item<double>(), 0.0);
  EXPECT_THROW(committee_vector_deviation(torch::zeros({3})), std::invalid_argument);
}

TEST(CommitteeDeviation, FrameSpreadFromPartsByHand) {
  // Two parts of a four-atom frame (two ranks), three members. Part A: spreads 1 and 2, member
  // energies 1, 2, 3; part B: spreads 3 and 0, member energies 1, 1, 4 (a member's part energy).
  const double spreads_a[] = {1.0, 2.0};
  const double spreads_b[] = {3.0, 0.0};
  const std::vector<double> a =
      committee_spread_sums(spreads_a, 2, torch::tensor({1.0, 2.0, 3.0}, torch::kFloat64), 3);
  const std::vector<double> b =
      committee_spread_sums(spreads_b, 2, torch::tensor({{1.0}, {1.0}, {4.0}}), 3);
  EXPECT_EQ(a, (std::vector<double>{5.0, 2.0, 1.0, 2.0, 3.0}));
  EXPECT_EQ(b, (std::vector<double>{9.0, 2.0, 1.0, 1.0, 4.0}));
  std::vector<double> totals(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) totals[i] = a[i] + b[i];

  // Squared spreads 14 over 4 atoms; member energies 2, 3, 7 -> mean 4, squared deviations
  // 4, 1, 9 -> standard deviation sqrt(14/3), per atom of the frame.
  const CommitteeFrameSpread spread = committee_frame_spread(totals.data(), 3, 4);
  EXPECT_EQ(spread.mean_square_force_spread, 14.0 / 4.0);
  EXPECT_EQ(spread.mean_energy, 4.0);
  EXPECT_NEAR(spread.energy_spread_per_atom, std::sqrt(14.0 / 3.0) / 4.0, 1e-15);
  // Without the frame's atom count: per atom the sums counted (the same 4 here); with 8, half.
  EXPECT_EQ(committee_frame_spread(totals.data(), 3, 0).energy_spread_per_atom,
            spread.energy_spread_per_atom);
  EXPECT_NEAR(committee_frame_spread(totals.data(), 3, 8).energy_spread_per_atom,
              spread.energy_spread_per_atom / 2.0, 1e-15);

  // One member, or no member energies: no energy spread; a part without atoms counts nothing.
  const std::vector<double> single = committee_spread_sums(spreads_a, 2, torch::Tensor(), 1);
  EXPECT_EQ(single, (std::vector<double>{5.0, 2.0, 0.0}));
  EXPECT_EQ(committee_frame_spread(single.data(), 1, 2).energy_spread_per_atom, 0.0);
  const std::vector<double> empty = committee_spread_sums(nullptr, 0, torch::Tensor(), 2);
  EXPECT_EQ(committee_frame_spread(empty.data(), 2, 0).mean_square_force_spread, 0.0);
}

TEST(CommitteeDeviation, SessionForceUncertaintyIsTheMembersFoldedSpread) {
  const double cutoff = 4.5;
  const auto configurations = argon_configurations(1, cutoff);
  const MdConfiguration& md = *configurations.front();
  auto model = argon_model(cutoff);
  TrainingSessionSettings settings;
  settings.stats_frames = 0;
  TrainingSession session(model, settings, MPI_COMM_WORLD);

  const FramePart frame = md.frame();
  std::vector<double> per_atom(static_cast<std::size_t>(md.num_local()), -1.0);
  const double largest = session.force_uncertainty(frame, per_atom.data());

  // By hand: every member's forces on the graph, folded onto the owned atoms, then the formula
  // written out member by member.
  const FrameGraph graph = frame_graph(frame, cutoff, 0);
  PredictionOptions options;
  options.member_forces = true;
  const Prediction prediction = predict(*model, graph.graph, options);
  const torch::Tensor members =
      fold_forces(prediction.member_forces.detach().to(torch::kFloat64), graph.routing.force_owner);
  const int64_t count = members.size(0);
  ASSERT_EQ(count, 3);
  double expected_max = 0.0;
  const torch::Tensor kept = graph.kept_atoms;
  for (int64_t a = 0; a < kept.size(0); ++a) {
    const int64_t atom = kept[a].item<int64_t>();
    if (atom >= md.num_local()) continue;
    double mean[3] = {0, 0, 0};
    for (int64_t k = 0; k < count; ++k)
      for (int d = 0; d < 3; ++d) mean[d] += members[k][a][d].item<double>() / count;
    double sum = 0.0;
    for (int64_t k = 0; k < count; ++k)
      for (int d = 0; d < 3; ++d) sum += std::pow(members[k][a][d].item<double>() - mean[d], 2);
    const double expected = std::sqrt(sum / count);
    EXPECT_NEAR(per_atom[static_cast<std::size_t>(atom)], expected, 1e-12 * (1.0 + expected));
    expected_max = std::max(expected_max, expected);
  }
  EXPECT_GT(expected_max, 0.0);
  EXPECT_NEAR(largest, expected_max, 1e-12 * expected_max);
}

}  // namespace
}  // namespace otf::testing

// Labelled-frame intake: a rank's part of a frame (MD arrays) becomes the graph and labels the
// model trains on, with only the atoms the centres use, the owned atoms' forces labelled, ghost
// forces folded onto their atoms, and stress as -virial / volume.
#include <gtest/gtest.h>

#include "frame_intake.h"
#include "training_test_support.h"

namespace otf::testing {
namespace {

TEST(FrameIntake, KeepsUsedAtomsLabelsOwnedForcesAndFoldsGhosts) {
  const double cutoff = 4.5;
  const auto configurations = argon_configurations(1, cutoff);
  const MdConfiguration& md = *configurations.front();
  FramePart frame = md.labelled_frame();
  frame.virial = {1.0, 2.0, 3.0, 0.5, -0.25, 0.125};
  frame.volume = 100.0;

  const FrameGraph graph = frame_graph(frame, cutoff);
  const int64_t kept = graph.kept_atoms.size(0);
  ASSERT_LE(kept, frame.system.num_atoms);
  ASSERT_GE(kept, md.num_local());
  // Owned atoms first and all of them kept (every one is a centre).
  for (int64_t a = 0; a < md.num_local(); ++a) EXPECT_EQ(graph.kept_atoms[a].item<int64_t>(), a);
  EXPECT_EQ(graph.graph.centers.size(0), md.num_local());
  EXPECT_TRUE(graph.graph.center_energy_mask.all().item<bool>());
  // Every ghost hands its force to the owned atom it is an image of.
  for (int64_t a = 0; a < kept; ++a) {
    const int64_t atom = graph.kept_atoms[a].item<int64_t>();
    const int64_t owner = graph.force_owner[a].item<int64_t>();
    EXPECT_EQ(owner, frame.force_owner[atom]) << "graph atom " << a;
  }

  const FrameLabels labels = frame_labels(frame, graph, /*stress=*/true);
  EXPECT_EQ(labels.energy, md.energy());
  EXPECT_EQ(labels.atoms_in_frame, md.num_local());
  EXPECT_EQ(labels.force_mask.sum().item<int64_t>(), md.num_local());
  for (int64_t a = 0; a < md.num_local(); ++a)
    for (int d = 0; d < 3; ++d)
      EXPECT_EQ(labels.forces[a][d].item<double>(),
                md.owned_forces()[static_cast<std::size_t>(3 * a + d)]);
  if (kept > md.num_local()) {
    EXPECT_FALSE(labels.force_mask[md.num_local()].item<bool>());
    EXPECT_EQ(labels.forces[md.num_local()].abs().sum().item<double>(), 0.0);
  }
  // xx yy zz xy xz yz -> the symmetric tensor, negated and divided by the volume.
  ASSERT_TRUE(labels.stress.defined());
  EXPECT_DOUBLE_EQ(labels.stress[0][0].item<double>(), -0.01);
  EXPECT_DOUBLE_EQ(labels.stress[2][2].item<double>(), -0.03);
  EXPECT_DOUBLE_EQ(labels.stress[0][1].item<double>(), -0.005);
  EXPECT_DOUBLE_EQ(labels.stress[2][0].item<double>(), 0.0025);
  EXPECT_DOUBLE_EQ(labels.stress[1][2].item<double>(), -0.00125);
  EXPECT_FALSE(frame_labels(frame, graph, /*stress=*/false).stress.defined());
}

TEST(FrameIntake, SplitFrameCountsOnlyOwnedCentresEnergies) {
  const double cutoff = 4.5;
  const auto configurations = argon_configurations(1, cutoff);
  FramePart frame = configurations.front()->frame();
  // As a rank with ghost centres would mark them: the last two centres' energies count elsewhere.
  std::vector<unsigned char> counts(static_cast<std::size_t>(frame.system.num_centers), 1);
  counts[counts.size() - 1] = counts[counts.size() - 2] = 0;
  frame.center_energy_counts = counts.data();
  frame.force_owner = nullptr;
  const FrameGraph graph = frame_graph(frame, cutoff);
  EXPECT_FALSE(graph.force_owner.defined());
  EXPECT_EQ(graph.graph.center_energy_mask.sum().item<int64_t>(), frame.system.num_centers - 2);
  const NeighborGraph owned = owned_centres(graph.graph);
  EXPECT_EQ(owned.centers.size(0), frame.system.num_centers - 2);
}

}  // namespace
}  // namespace otf::testing

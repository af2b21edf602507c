// Labelled-frame intake: a rank's part of a frame (MD arrays) becomes the graph and labels the
// model trains on, with only the atoms the centres use, the owned atoms' forces labelled, ghost
// forces routed to their owners (folded here, or a halo to other ranks), and stress as
// -virial / volume.
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

  const FrameGraph graph = frame_graph(frame, cutoff, 0);
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
    const int64_t owner = graph.routing.force_owner[a].item<int64_t>();
    EXPECT_EQ(owner, frame.owner_centre[atom]) << "graph atom " << a;
  }
  EXPECT_EQ(graph.routing.halo_rows.numel(), 0);

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

// On several ranks the ghosts that other ranks own form the halo: their rows, the owner's rank and
// the owner's row (its centre index); they keep their own force rows (zeroed when routed).
TEST(FrameIntake, GhostsOfOtherRanksFormTheHalo) {
  const double cutoff = 4.5;
  const auto configurations = argon_configurations(1, cutoff);
  FramePart frame = configurations.front()->labelled_frame();
  const int atoms = frame.system.num_atoms;
  std::vector<int> ranks(static_cast<std::size_t>(atoms), 1);
  std::vector<int> centres(frame.owner_centre, frame.owner_centre + atoms);
  // As rank 1 of 3: owned atoms are rank 1's; ghosts alternate between ranks 0 and 2.
  for (int j = frame.system.num_local; j < atoms; ++j) ranks[static_cast<std::size_t>(j)] = j % 2 == 0 ? 0 : 2;
  frame.owner_rank = ranks.data();
  frame.owner_centre = centres.data();
  const FrameGraph graph = frame_graph(frame, cutoff, 1);
  const int64_t kept = graph.kept_atoms.size(0);
  const int64_t halo = graph.routing.halo_rows.numel();
  EXPECT_EQ(halo, kept - frame.system.num_local);
  ASSERT_GT(halo, 0);
  for (int64_t h = 0; h < halo; ++h) {
    const int64_t row = graph.routing.halo_rows[h].item<int64_t>();
    const int64_t atom = graph.kept_atoms[row].item<int64_t>();
    EXPECT_EQ(graph.routing.halo_ranks[h].item<int64_t>(), ranks[static_cast<std::size_t>(atom)]);
    EXPECT_EQ(graph.routing.halo_owner_rows[h].item<int64_t>(), centres[static_cast<std::size_t>(atom)]);
    EXPECT_EQ(graph.routing.force_owner[row].item<int64_t>(), row) << "a halo row is not folded";
  }
  const FrameLabels labels = frame_labels(frame, graph, false);
  const TrainingBatch batch = labelled_frame(graph.graph, labels);
  EXPECT_TRUE(torch::equal(batch.at("halo_rows"), graph.routing.halo_rows));
  EXPECT_TRUE(torch::equal(batch.at("halo_owner_rows"), graph.routing.halo_owner_rows));

  // An owned atom that names another owner is refused, with the atom named.
  ranks[0] = 2;
  try {
    frame_graph(frame, cutoff, 1);
    FAIL() << "an owned atom owned by another rank was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("atom 0 (owned)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace otf::testing

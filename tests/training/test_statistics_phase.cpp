// The statistics phase on its own: the first N frames' descriptor moments and energies, then the
// energy shifts are fitted and the statistics frozen; frames after that change nothing; its state
// survives a save/load round trip; 0 frames, or a model frozen already, is ready at once. Frames
// of a crystal that is still warming up (each wider than those before) extend the phase until the
// descriptors stop widening, at most to the phase's limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "communicator.h"
#include "frame_intake.h"
#include "statistics_phase.h"
#include "training_test_support.h"

namespace otf::testing {
namespace {

TEST(StatisticsPhase, FreezesAfterItsFramesAndRestores) {
  const double cutoff = 4.5;
  const auto configurations = argon_configurations(3, cutoff);
  auto model = argon_model(cutoff);
  SingleProcessCommunicator communicator;
  StatisticsPhase phase(2, model->descriptor_statistics_frozen());
  ASSERT_FALSE(phase.ready());
  const auto graph = [&](int k) {
    return frame_graph(configurations[static_cast<std::size_t>(k)]->frame(), cutoff, 0).graph;
  };
  phase.add_frame(*model, graph(0), configurations[0]->energy(), communicator);
  EXPECT_FALSE(phase.ready());
  EXPECT_FALSE(model->energy_shifts_fitted());

  // The state after one frame, saved and loaded into a fresh phase.
  torch::serialize::OutputArchive saved;
  phase.save(saved);
  std::ostringstream bytes;
  saved.save_to(bytes);
  torch::serialize::InputArchive loaded;
  std::istringstream stream(bytes.str());
  loaded.load_from(stream);
  StatisticsPhase restored(2, false);
  restored.load(loaded, "test state");
  EXPECT_FALSE(restored.ready());

  phase.add_frame(*model, graph(1), configurations[1]->energy(), communicator);
  EXPECT_TRUE(phase.ready());
  EXPECT_TRUE(model->energy_shifts_fitted());
  EXPECT_TRUE(model->descriptor_statistics_frozen());
  const torch::Tensor counts = model->buffers()[0].clone();
  phase.add_frame(*model, graph(2), configurations[2]->energy(), communicator);    // no-op
  EXPECT_TRUE(torch::equal(model->buffers()[0], counts));

  // The restored phase needs exactly one more frame, as the original did. (The descriptor
  // statistics gathered so far are the model's: a restart restores them with the model.)
  auto twin = argon_model(cutoff);
  StatisticsPhase(2, false).add_frame(*twin, graph(0), configurations[0]->energy(), communicator);
  restored.add_frame(*twin, graph(1), configurations[1]->energy(), communicator);
  EXPECT_TRUE(restored.ready());

  EXPECT_TRUE(StatisticsPhase(0, false).ready());
  EXPECT_TRUE(StatisticsPhase(4, true).ready());
}

// A simple cubic crystal of 27 atoms, each displaced by a Gaussian of the given width.
MdConfiguration displaced_crystal(double width, uint64_t seed, double cutoff) {
  constexpr double kSpacing = 3.4;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0.0, 1.0);
  PeriodicConfiguration config;
  config.cell = {{{3 * kSpacing, 0.0, 0.0}, {0.0, 3 * kSpacing, 0.0}, {0.0, 0.0, 3 * kSpacing}}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) {
        for (const int n : {i, j, k}) config.positions.push_back(n * kSpacing + width * gauss(rng));
        config.species.push_back(0);
      }
  return MdConfiguration(config, cutoff);
}

TEST(StatisticsPhase, GoesOnWhileTheDescriptorsWidenAndStopsWhenTheyDoNot) {
  const double cutoff = 4.5;
  SingleProcessCommunicator communicator;
  auto model = argon_model(cutoff);
  StatisticsPhase phase(4, false);
  // A crystal warming up: the displacements grow for 12 frames, then stay thermal.
  int64_t frames = 0;
  for (int k = 0; k < 40 && !phase.ready(); ++k, ++frames) {
    const double width = 0.01 * std::min(k, 12);
    const MdConfiguration frame = displaced_crystal(width, 300 + static_cast<uint64_t>(k), cutoff);
    phase.add_frame(*model, frame_graph(frame.frame(), cutoff, 0).graph, frame.energy(),
                    communicator);
  }
  ASSERT_TRUE(phase.ready());
  // Not after the 4 frames asked for (they were still widening), and not long after the
  // displacements stopped growing (frame 12).
  EXPECT_GT(phase.frames(), 12);
  EXPECT_LT(phase.frames(), 30);
  EXPECT_EQ(phase.frames(), frames);
  EXPECT_LE(phase.last_spread_ratio(), phase.last_limit());
  EXPECT_TRUE(model->descriptor_statistics_frozen());
}

TEST(StatisticsPhase, RepresentativeFramesFreezeAfterTheFramesAskedFor) {
  const double cutoff = 4.5;
  SingleProcessCommunicator communicator;
  auto model = argon_model(cutoff);
  StatisticsPhase phase(4, false);
  for (int k = 0; k < 4; ++k) {
    EXPECT_FALSE(phase.ready());
    const MdConfiguration frame = displaced_crystal(0.1, 400 + static_cast<uint64_t>(k), cutoff);
    phase.add_frame(*model, frame_graph(frame.frame(), cutoff, 0).graph, frame.energy(),
                    communicator);
  }
  EXPECT_TRUE(phase.ready());
  EXPECT_EQ(phase.frames(), 4);
}

TEST(StatisticsPhase, EndsAtItsLimitWhenTheDescriptorsKeepWidening) {
  EXPECT_EQ(StatisticsPhase::default_max_frames(1), 50);
  EXPECT_EQ(StatisticsPhase::default_max_frames(4), 50);
  EXPECT_EQ(StatisticsPhase::default_max_frames(8), 80);
  const double cutoff = 4.5;
  SingleProcessCommunicator communicator;
  auto model = argon_model(cutoff);
  StatisticsPhase phase(1, false, 10);
  for (int k = 0; k < 12; ++k) {
    EXPECT_EQ(phase.ready(), k >= 10) << "frame " << k;
    // Each frame's displacements 1.6 x those of the one before: never representative.
    const MdConfiguration frame =
        displaced_crystal(0.02 * std::pow(1.6, k), 500 + static_cast<uint64_t>(k), cutoff);
    phase.add_frame(*model, frame_graph(frame.frame(), cutoff, 0).graph, frame.energy(),
                    communicator);
    if (k > 0 && k < 10) {
      EXPECT_GT(phase.last_spread_ratio(), phase.last_limit()) << "frame " << k;
    }
  }
  EXPECT_EQ(phase.frames(), 10);
}

}  // namespace
}  // namespace otf::testing

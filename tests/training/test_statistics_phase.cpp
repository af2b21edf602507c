// The statistics phase on its own: the first N frames' descriptor moments and energies, then the
// energy shifts are fitted and the statistics frozen; frames after that change nothing; its state
// survives a save/load round trip; 0 frames, or a model frozen already, is ready at once.
#include <gtest/gtest.h>

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
    return frame_graph(configurations[static_cast<std::size_t>(k)]->frame(), cutoff).graph;
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

  // The restored phase needs exactly one more frame, as the original did.
  auto twin = argon_model(cutoff);
  restored.add_frame(*twin, graph(1), configurations[1]->energy(), communicator);
  EXPECT_TRUE(restored.ready());

  EXPECT_TRUE(StatisticsPhase(0, false).ready());
  EXPECT_TRUE(StatisticsPhase(4, true).ready());
}

}  // namespace
}  // namespace otf::testing

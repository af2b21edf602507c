// Resuming after a kill (training/journal_replay.h): the journal's frames after a restart file's
// point are served once, in order, to the configurations they label, in the rank's atom order;
// frames the MD goes past or reaches elsewhere are handed back as missed; a journal that does not
// continue the restart file is refused with a message naming it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "journal_replay.h"
#include "label_journal.h"
#include "labelled_frame_samples.h"

namespace otf::testing {
namespace {

LabelledFrame frame_of_call(int64_t step, int64_t call) {
  LabelledFrame frame = sample_frame(step, false);
  frame.call = call;
  return frame;
}

// The frame's configuration as one MD rank holds it, atoms in another order than the journal's.
struct Configuration {
  explicit Configuration(const LabelledFrame& frame) {
    for (const std::size_t a : {2u, 0u, 3u, 1u}) {
      ids.push_back(frame.ids[a]);
      for (std::size_t d = 0; d < 3; ++d) positions.push_back(frame.positions[3 * a + d]);
    }
    view.step = frame.step;
    view.num_local = 4;
    view.positions = positions.data();
    view.ids = ids.data();
    view.atoms_in_frame = 4;
  }
  std::vector<double> positions;
  std::vector<int64_t> ids;
  ReferenceConfiguration view;
};

TEST(JournalReplay, ServesTheFramesAfterTheRestartOnceInTheRanksOrder) {
  TempPath path;
  int64_t offset = 0;
  {
    LabelJournalWriter writer(path.str());
    writer.append(frame_of_call(10, 1));  // before the restart file
    offset = writer.size_bytes();
    writer.append(frame_of_call(11, 2));
    writer.append(frame_of_call(12, 3));
    writer.append(frame_of_call(14, 4));
  }
  JournalReplay replay(path.str(), offset, 1, MPI_COMM_WORLD);
  EXPECT_EQ(replay.pending(), 3);
  EXPECT_EQ(replay.first_step(), 11);
  EXPECT_EQ(replay.last_step(), 14);
  EXPECT_EQ(replay.next_offset(), offset);

  // The restart step evaluated again (LAMMPS' setup): the last frame before the restart, once.
  const LabelledFrame ten = frame_of_call(10, 1);
  Configuration at_ten(ten);
  const auto repeated = replay.take_repeated(at_ten.view);
  ASSERT_TRUE(repeated.has_value());
  EXPECT_EQ(repeated->owned_forces[0], ten.forces[6]);
  EXPECT_FALSE(replay.take_repeated(at_ten.view).has_value());

  const LabelledFrame eleven = frame_of_call(11, 2);
  Configuration at_eleven(eleven);
  at_eleven.view.step = 10;
  EXPECT_FALSE(replay.take(at_eleven.view).has_value());  // not due yet
  at_eleven.view.step = 11;
  const auto label = replay.take(at_eleven.view);
  ASSERT_TRUE(label.has_value());
  EXPECT_EQ(label->energy, eleven.energy);
  EXPECT_EQ(label->virial, eleven.virial);
  ASSERT_EQ(label->owned_forces.size(), 12u);
  EXPECT_EQ(label->owned_forces[0], eleven.forces[6]);  // atom id 5 first
  EXPECT_EQ(label->owned_forces[3], eleven.forces[0]);
  EXPECT_EQ(replay.pending(), 2);
  EXPECT_GT(replay.next_offset(), offset);

  // Step 12 moved elsewhere: missed; step 14 is never asked for: missed once step 15 comes.
  Configuration at_twelve(frame_of_call(12, 3));
  at_twelve.positions[4] += 1e-3;
  EXPECT_FALSE(replay.take(at_twelve.view).has_value());
  EXPECT_EQ(replay.pending(), 1);
  EXPECT_EQ(replay.take_missed(14).size(), 1u);
  const std::vector<LabelledFrame> missed = replay.take_missed(15);
  ASSERT_EQ(missed.size(), 1u);
  EXPECT_EQ(missed.front().step, 14);
  EXPECT_EQ(replay.pending(), 0);
  EXPECT_TRUE(replay.finished());
}

TEST(JournalReplay, RefusesAJournalThatDoesNotContinueTheRestartFile) {
  TempPath path;
  {
    LabelJournalWriter writer(path.str());
    writer.append(frame_of_call(5, 7));
  }
  try {
    JournalReplay replay(path.str(), 0, 2, MPI_COMM_WORLD);
    FAIL() << "accepted call 7 after 2 calls";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not continue the restart file"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("expected 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(JournalReplay(path.str(), 1 << 20, 0, MPI_COMM_WORLD), std::runtime_error);
  // Not where a frame ends.
  EXPECT_THROW(JournalReplay(path.str(), 5, 0, MPI_COMM_WORLD), std::runtime_error);
}

}  // namespace
}  // namespace otf::testing

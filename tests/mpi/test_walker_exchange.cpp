// Walkers sharing one model (training/walker_exchange.h, docs/design.md §14): the job's ranks are
// split into walkers as LAMMPS' -partition splits them, and a round hands every walker's label,
// bit for bit, to world rank 0 of every walker, in walker order. Run with 1, 2, 3 and 4 ranks:
// 4 ranks make 2 walkers of 2 ranks and 4 walkers of 1; 3 ranks make walkers of 2 and 1 ranks,
// which are refused; 1 and 2 ranks make one walker per rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ipi_server.h"
#include "labelled_frame_samples.h"
#include "walker_exchange.h"
#include "world_ranks.h"

namespace otf {
namespace {

using testing::expect_same_frame;
using testing::sample_frame;
using testing::world_rank;
using testing::world_size;

// Walker w holds ranks [w*K, (w+1)*K), the way -partition MxK numbers them; the last walker takes
// what is left over. Owns its communicators.
class Walkers {
 public:
  explicit Walkers(int ranks_per_walker) {
    const int rank = world_rank();
    layout.walker = rank / ranks_per_walker;
    layout.walkers = (world_size() + ranks_per_walker - 1) / ranks_per_walker;
    MPI_Comm_split(MPI_COMM_WORLD, layout.walker, rank, &world);
    int walker_rank = 0;
    MPI_Comm_rank(world, &walker_rank);
    MPI_Comm_split(MPI_COMM_WORLD, walker_rank == 0 ? 0 : MPI_UNDEFINED, layout.walker, &roots);
    layout.roots = roots;
    is_root = walker_rank == 0;
  }
  ~Walkers() {
    if (roots != MPI_COMM_NULL) MPI_Comm_free(&roots);
    MPI_Comm_free(&world);
  }
  Walkers(const Walkers&) = delete;
  Walkers& operator=(const Walkers&) = delete;

  WalkerLayout layout;
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm roots = MPI_COMM_NULL;
  bool is_root = false;
};

TEST(WalkerFiles, EachWalkerNamesItsFileBeforeTheExtension) {
  const WalkerLayout one;
  EXPECT_EQ(walker_file_path("labels.extxyz", one), "labels.extxyz");
  WalkerLayout third{2, 4, MPI_COMM_NULL};
  EXPECT_EQ(walker_file_path("labels.extxyz", third), "labels.walker2.extxyz");
  EXPECT_EQ(walker_file_path("run.d/learning.csv", third), "run.d/learning.walker2.csv");
  EXPECT_EQ(walker_file_path("run.d/journal", third), "run.d/journal.walker2");
  EXPECT_EQ(walker_file_path(".hidden", third), ".hidden.walker2");
  EXPECT_EQ(walker_file_path("a.b/c", third), "a.b/c.walker2");
  EXPECT_EQ(walker_file_path("", third), "");  // no file stays no file
}

TEST(WalkerFiles, EachWalkerListensOnItsOwnAddress) {
  const IpiAddress unix_address{IpiAddress::Kind::Unix, "si-dft", 0};
  EXPECT_EQ(walker_address(unix_address, 3, 4).unix_path(), "/tmp/ipi_si-dft-walker3");
  const IpiAddress inet{IpiAddress::Kind::Inet, "127.0.0.1", 31415};
  EXPECT_EQ(walker_address(inet, 0, 4).port, 31415);
  EXPECT_EQ(walker_address(inet, 3, 4).port, 31418);
  const IpiAddress any_port{IpiAddress::Kind::Inet, "127.0.0.1", 0};
  EXPECT_EQ(walker_address(any_port, 3, 4).port, 0);
  // The last walker's port would pass 65535: refused on every walker alike, naming the limit.
  const IpiAddress high{IpiAddress::Kind::Inet, "127.0.0.1", 65534};
  try {
    walker_address(high, 0, 4);
    FAIL() << "port 65534 accepted for 4 walkers";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at most 65532"), std::string::npos) << e.what();
  }
}

// One walker: a round hands back this walker's own label, as before walkers existed.
TEST(WalkerExchange, OneWalkerRoundsKeepItsOwnLabel) {
  WalkerExchange exchange(WalkerLayout{}, MPI_COMM_WORLD);
  EXPECT_FALSE(exchange.shared());
  const LabelledFrame label = sample_frame(7, false);
  const WalkerRound round =
      exchange.round(world_rank() == 0 ? &label : nullptr, false, std::string());
  EXPECT_EQ(round.frame_count, 1);
  if (world_rank() == 0) expect_same_frame(round.frames.at(0), label);
  EXPECT_TRUE(exchange.same_everywhere(42u));
}

void check_rounds(int ranks_per_walker) {
  Walkers walkers(ranks_per_walker);
  WalkerExchange exchange(walkers.layout, walkers.world);
  ASSERT_TRUE(exchange.shared());
  const int count = walkers.layout.walkers;
  // Round 1: every odd walker brings a label of its own step; the others none.
  const bool brings = walkers.layout.walker % 2 == 1;
  LabelledFrame mine = sample_frame(100 + walkers.layout.walker, true);
  mine.walker = walkers.layout.walker;
  const WalkerRound round =
      exchange.round(brings && walkers.is_root ? &mine : nullptr, !brings, std::string());
  EXPECT_EQ(round.frame_count, count / 2);
  EXPECT_FALSE(round.all_at_step_end);
  EXPECT_TRUE(round.stop_reason.empty());
  if (walkers.is_root) {
    ASSERT_EQ(round.frames.size(), static_cast<std::size_t>(count / 2));
    for (std::size_t k = 0; k < round.frames.size(); ++k) {
      const int walker = 2 * static_cast<int>(k) + 1;
      EXPECT_EQ(round.frame_walkers[k], walker);
      // The frame walker `walker` made, bit for bit (the exchange writes %.17g text).
      LabelledFrame expected = sample_frame(100 + walker, true);
      expected.walker = walker;
      expect_same_frame(round.frames[k], expected);
    }
  } else {
    EXPECT_TRUE(round.frames.empty());
  }
  // Round 2: every walker at the step end; walker 1 wants the run to stop; the next label steps
  // are 30 + walker, so no walker needs a round before step 30.
  const std::string reason = walkers.layout.walker == 1 ? "the budget is spent" : "";
  const WalkerRound last = exchange.round(nullptr, true, reason, 30 + walkers.layout.walker);
  EXPECT_EQ(last.frame_count, 0);
  EXPECT_TRUE(last.all_at_step_end);
  EXPECT_EQ(last.next_round_step, 30);
  EXPECT_EQ(last.stop_reason, "walker 1: the budget is spent");
  // Replica hashes: equal everywhere, then one rank of the last walker differs.
  EXPECT_TRUE(exchange.same_everywhere(0x1234u));
  const bool odd_one = world_rank() == world_size() - 1;
  EXPECT_FALSE(exchange.same_everywhere(odd_one ? 0x1235u : 0x1234u));
  // Walker 0's root speaks (e.g. how its model file write went); every rank of every walker hears
  // it, whatever it held itself.
  const bool first_root = walkers.layout.walker == 0 && walkers.is_root;
  EXPECT_EQ(exchange.from_first_walker(first_root ? "disk full" : "walker " +
                                       std::to_string(walkers.layout.walker)),
            "disk full");
}

TEST(WalkerExchange, EveryWalkerGetsEveryLabelInWalkerOrder) {
  if (world_size() < 2 || world_size() % 2 != 0) GTEST_SKIP() << "needs an even rank count";
  check_rounds(1);  // walkers of one rank each
  if (world_size() == 4) check_rounds(2);  // two walkers of two ranks
}

TEST(WalkerExchange, WalkersOfDifferentRankCountsAreRefusedOnEveryRank) {
  if (world_size() != 3) GTEST_SKIP() << "needs 3 ranks (walkers of 2 and 1)";
  Walkers walkers(2);
  try {
    WalkerExchange exchange(walkers.layout, walkers.world);
    FAIL() << "walkers of 2 and 1 ranks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("as many ranks each"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace otf

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // An exception escaping a test on one rank must end the job, not let that rank run on into the
  // next test's collectives.
  GTEST_FLAG_SET(catch_exceptions, false);
  const int local_result = RUN_ALL_TESTS();
  int job_result = 0;
  MPI_Allreduce(&local_result, &job_result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return job_result;
}

// The one judgement of an ab initio client's non-convergence: its i-PI extra string ("converged"
// or "scf_converged" false in JSON, any other text free-form) and the marker text its log gained
// during a call (not what the log held before it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "scf_convergence.h"

namespace otf::testing {
namespace {

TEST(ScfConvergence, ExtraStringSaysNotConvergedOnlyWithAFalseFlag) {
  EXPECT_TRUE(extra_says_not_converged(R"({"converged": false})"));
  EXPECT_TRUE(extra_says_not_converged(R"({"energy": 1.0, "scf_converged":false})"));
  EXPECT_TRUE(extra_says_not_converged("{\"converged\" :\n  false, \"x\": 2}"));
  // A later occurrence counts when an earlier one is no key.
  EXPECT_TRUE(extra_says_not_converged(R"({"note": "converged", "converged": false})"));
  EXPECT_FALSE(extra_says_not_converged(R"({"converged": true})"));
  EXPECT_FALSE(extra_says_not_converged(R"({"scf_converged": 1})"));
  EXPECT_FALSE(extra_says_not_converged(""));
  EXPECT_FALSE(extra_says_not_converged("SCF run NOT converged"));  // free text: the log's business
  EXPECT_FALSE(extra_says_not_converged(R"({"converged")"));
  EXPECT_FALSE(extra_says_not_converged(R"({"converged": fals)"));
}

class ScratchLog {
 public:
  ScratchLog()
      : path_(::testing::TempDir() + "scf_convergence_" + std::to_string(::getpid()) + ".log") {
    std::remove(path_.c_str());
  }
  ~ScratchLog() { std::remove(path_.c_str()); }
  void append(const std::string& text) const {
    std::ofstream(path_, std::ios::app | std::ios::binary) << text;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ScfConvergence, LogCountsOnlyWhatTheCallAdded) {
  const ScratchLog log;
  ClientLogConvergence judge(log.path(), "SCF run NOT converged");
  judge.begin_call();  // no log yet
  EXPECT_FALSE(judge.gained_marker());
  log.append("step 1\n *** SCF run NOT converged ***\n");
  EXPECT_TRUE(judge.gained_marker());

  // The next call: the earlier marker is history.
  judge.begin_call();
  EXPECT_FALSE(judge.gained_marker());
  log.append("step 2\n SCF run converged in 12 steps\n");
  EXPECT_FALSE(judge.gained_marker());
  judge.begin_call();
  log.append("SCF run NOT converged\n");
  EXPECT_TRUE(judge.gained_marker());
}

TEST(ScfConvergence, LogWithoutMarkerOrPathIsNeverRead) {
  const ScratchLog log;
  log.append("SCF run NOT converged\n");
  for (const ClientLogConvergence& off :
       {ClientLogConvergence(log.path(), ""), ClientLogConvergence("", "SCF run NOT converged")}) {
    ClientLogConvergence judge = off;
    judge.begin_call();
    log.append("SCF run NOT converged\n");
    EXPECT_FALSE(judge.gained_marker());
  }
}

}  // namespace
}  // namespace otf::testing

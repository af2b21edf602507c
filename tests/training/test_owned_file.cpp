// Files removed when their owner is done or at process exit (training/owned_file.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "owned_file.h"

namespace otf {
namespace {

std::string scratch(const std::string& what) {
  return "/tmp/otftest_owned_" + std::to_string(::getpid()) + "_" + what;
}

bool exists(const std::string& path) {
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0;
}

TEST(OwnedFile, RemovedByItsDestructorAndUnregistered) {
  const std::string path = scratch("destructor");
  std::ofstream(path) << "x";
  const int before = owned_files_registered();
  {
    OwnedFile file(path);
    EXPECT_TRUE(file.owned());
    EXPECT_EQ(owned_files_registered(), before + 1);
  }
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(owned_files_registered(), before);
}

TEST(OwnedFile, AMissingFileIsNotOwned) {
  OwnedFile file(scratch("missing"));
  EXPECT_FALSE(file.owned());
}

TEST(OwnedFile, AFileReplacedByAnotherIsLeftAlone) {
  const std::string path = scratch("replaced");
  const std::string theirs = scratch("theirs");
  std::ofstream(path) << "ours";
  {
    OwnedFile file(path);
    // Another process puts its own file at the path (created while ours exists, so its inode
    // differs).
    std::ofstream(theirs) << "theirs";
    ASSERT_EQ(::rename(theirs.c_str(), path.c_str()), 0);
  }
  EXPECT_TRUE(exists(path));
  EXPECT_EQ(remove_owned_files_now(), 0);
  EXPECT_TRUE(exists(path));
  ::unlink(path.c_str());
}

TEST(OwnedFile, MovedOwnershipRemovesOnce) {
  const std::string path = scratch("moved");
  std::ofstream(path) << "x";
  OwnedFile target;
  {
    OwnedFile file(path);
    target = std::move(file);
    EXPECT_FALSE(file.owned());  // NOLINT(bugprone-use-after-move): the point of the test
  }
  EXPECT_TRUE(exists(path));
  target.remove();
  EXPECT_FALSE(exists(path));
}

TEST(OwnedFile, TheExitHandlerRemovesWhatNoDestructorRemoved) {
  const std::string path = scratch("at_exit");
  std::ofstream(path) << "x";
  auto* leaked = new OwnedFile(path);  // as LAMMPS leaves its fix when it ends by exit()
  EXPECT_EQ(remove_owned_files_now(), 1);
  EXPECT_FALSE(exists(path));
  delete leaked;  // finds nothing left to remove
}

TEST(OwnedFile, AForkedChildNeverRemovesItsParentsFiles) {
  const std::string kept = scratch("parent_file");
  std::ofstream(kept) << "x";
  OwnedFile parent_file(kept);
  const pid_t child = ::fork();
  if (child == 0) {
    // What the child's exit() handler would do; _exit keeps MPI's handlers out of the child.
    const int removed = remove_owned_files_now();
    ::_exit(removed);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child removed its parent's file";
  EXPECT_TRUE(exists(kept));
}

}  // namespace
}  // namespace otf

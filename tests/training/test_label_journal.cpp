// The label journal's durability: appends are on disk and survive reopening, a frame cut short by
// a killed writer is removed before new frames follow it, invalid frames are refused without
// writing, and a full file system leaves only whole frames. The extxyz text itself is
// test_extxyz.cpp's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "label_journal.h"
#include "labelled_frame_samples.h"

namespace otf::testing {
namespace {

TEST(LabelJournal, RoundTripsFramesBitForBit) {
  TempPath path;
  const LabelledFrame with = sample_frame(100, /*with_uncertainty=*/true);
  const LabelledFrame without = sample_frame(250, /*with_uncertainty=*/false);
  {
    LabelJournalWriter writer(path.str());
    writer.append(with);
    writer.append(without);
    EXPECT_EQ(writer.frames_written(), 2);
    EXPECT_EQ(writer.path(), path.str());
    EXPECT_FALSE(writer.dropped_cut_short_frame());
  }
  struct stat info {};
  ASSERT_EQ(::stat(path.str().c_str(), &info), 0);
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  EXPECT_EQ(info.st_mode & 0777, 0644u & ~umask_now);
  const ExtxyzContents contents = read_extxyz_file(path.str());
  EXPECT_EQ(contents.truncated_frames, 0);
  ASSERT_EQ(contents.frames.size(), 2u);
  expect_same_frame(contents.frames[0], with);
  expect_same_frame(contents.frames[1], without);
  EXPECT_EQ(contents.frames[0].num_atoms(), 4);
}

TEST(LabelJournal, ReopenedWriterAppendsAfterEarlierFrames) {
  TempPath path;
  { LabelJournalWriter(path.str()).append(sample_frame(1, false)); }
  const std::string first_run = file_bytes(path.str());
  {
    LabelJournalWriter writer(path.str());
    writer.append(sample_frame(2, true));
    writer.append(sample_frame(3, false));
    EXPECT_EQ(writer.frames_written(), 2);
  }
  EXPECT_EQ(file_bytes(path.str()).compare(0, first_run.size(), first_run), 0);
  const ExtxyzContents contents = read_extxyz_file(path.str());
  ASSERT_EQ(contents.frames.size(), 3u);
  for (int i = 0; i < 3; ++i) expect_same_frame(contents.frames[i], sample_frame(i + 1, i == 1));
}

TEST(LabelJournal, WriterRemovesFrameCutShortByKilledWriter) {
  TempPath whole;
  LabelJournalWriter whole_writer(whole.str());
  whole_writer.append(sample_frame(1, false));
  const std::size_t first_end = file_bytes(whole.str()).size();
  whole_writer.append(sample_frame(2, false));
  const std::string bytes = file_bytes(whole.str());
  for (const std::size_t end : {first_end + 1, first_end + 2, first_end + 40, bytes.size() - 1}) {
    SCOPED_TRACE("file cut at byte " + std::to_string(end));
    TempPath cut;
    write_bytes(cut.str(), bytes.substr(0, end));
    LabelJournalWriter writer(cut.str());
    EXPECT_TRUE(writer.dropped_cut_short_frame());
    writer.append(sample_frame(3, true));
    const ExtxyzContents contents = read_extxyz_file(cut.str());
    EXPECT_EQ(contents.truncated_frames, 0);
    ASSERT_EQ(contents.frames.size(), 2u);
    expect_same_frame(contents.frames[0], sample_frame(1, false));
    expect_same_frame(contents.frames[1], sample_frame(3, true));
  }
}

TEST(LabelJournal, MissingFolderThrowsNamingIt) {
  const std::string dir_path = ::testing::TempDir() + "no_such_dir/journal.extxyz";
  const std::string open_message =
      message_of<std::runtime_error>([&] { LabelJournalWriter writer(dir_path); });
  EXPECT_CONTAINS(open_message, dir_path);
  EXPECT_CONTAINS(open_message, "No such file or directory");
}

TEST(LabelJournal, InvalidFramesAreRefusedWithoutWriting) {
  TempPath path;
  LabelJournalWriter writer(path.str());
  writer.append(sample_frame(1, true));
  const std::string before = file_bytes(path.str());

  for (const auto& [invalid, expected] : invalid_frames()) {
    SCOPED_TRACE(expected);
    const std::string message = message_of<std::invalid_argument>([&] { writer.append(invalid); });
    EXPECT_CONTAINS(message, expected);
    EXPECT_CONTAINS(message, path.str());
    EXPECT_EQ(file_bytes(path.str()), before);
  }
  EXPECT_EQ(writer.frames_written(), 1);
}

// A full disk, honestly: a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes write() stop
// part way through the frame and then fail (EFBIG), as ENOSPC does on a full file system. In a
// child process, so that the limit binds nothing else.
TEST(LabelJournal, WriteFailurePartWayLeavesOnlyWholeFrames) {
  TempPath path;
  {
    LabelJournalWriter writer(path.str());
    writer.append(sample_frame(1, false));
  }
  const std::string before = file_bytes(path.str());

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = before.size() + 100;  // room for part of the next frame only
    std::string result = "no exception";
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      result = "setrlimit failed";
    } else {
      try {
        LabelJournalWriter writer(path.str());
        writer.append(sample_frame(2, true));
      } catch (const std::runtime_error& error) {
        result = error.what();
      }
    }
    const ssize_t ignored = ::write(pipe_fds[1], result.data(), result.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  ssize_t got = 0;
  while ((got = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) message.append(buffer, got);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  EXPECT_CONTAINS(message, path.str());
  EXPECT_CONTAINS(message, "step 2");
  EXPECT_CONTAINS(message, std::strerror(EFBIG));
  EXPECT_CONTAINS(message, "left as it was");
  EXPECT_EQ(file_bytes(path.str()), before);
  const ExtxyzContents contents = read_extxyz_file(path.str());
  EXPECT_EQ(contents.truncated_frames, 0);
  ASSERT_EQ(contents.frames.size(), 1u);
  expect_same_frame(contents.frames[0], sample_frame(1, false));
}

}  // namespace
}  // namespace otf::testing

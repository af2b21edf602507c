// The label journal: frames round-trip bit for bit, appends survive reopening, a frame cut short
// at any byte is dropped (never misread), malformed and invalid frames are refused with a message
// that says where, a full file system leaves only whole frames, and ASE reads our files and we
// read ASE's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "label_journal.h"

namespace otf::testing {
namespace {

// A file name of its own under the test's temporary directory, removed at the end.
class TempPath {
 public:
  TempPath() {
    static int counter = 0;
    path_ = ::testing::TempDir() + "label_journal_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++) + ".extxyz";
    std::remove(path_.c_str());
  }
  ~TempPath() { std::remove(path_.c_str()); }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string source_dir() {
  const std::string file = __FILE__;
  return file.substr(0, file.rfind('/'));
}

// The message of the exception `call` throws as E, or a failure when it throws none.
template <typename E, typename F>
std::string message_of(F&& call) {
  try {
    call();
  } catch (const E& error) {
    return error.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

// A triclinic Si/O frame with numbers that %.6g would not round-trip.
JournalFrame sample_frame(int64_t step, bool with_uncertainty) {
  JournalFrame frame;
  frame.step = step;
  frame.call = step / 10 + 1;
  frame.units = "metal";
  frame.reference = "i-PI client \"cp2k\" at C:\\runs\\pbe\nsecond line";
  frame.cell = {5.1, 0.0, 0.0, 1.0 / 3.0, 4.9, 0.0, -0.7, 0.25, 6.000000000000001};
  frame.origin = {-0.1, 0.2, 1e-17};
  frame.symbols = {"Si", "O", "O", "Si"};
  frame.ids = {1, 2, 5, 17};
  frame.positions = {0.1,  0.2, 0.3, 1.0 / 7.0, 2.5, 3.5e-9,
                     4.75, 1.0, 2.0, -0.0,      5.9, 3.141592653589793};
  frame.forces = {1.5e-300, -2.0, 0.3,  6.02214076e23, -1.0 / 3.0, 0.0,
                  -1.0,     2.0,  1e-5, 0.1 + 0.2,     -0.0,       42.0};
  frame.energy = -1234.5678901234567 - static_cast<double>(step);
  frame.virial = {1.0 / 3.0, -2.5, 3.75, 0.125, -1e-10, 7.0};
  if (with_uncertainty) frame.uncertainty = {0.01, 0.2, 1.0 / 9.0, 0.0};
  return frame;
}

uint64_t bits(double value) {
  uint64_t b = 0;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

template <typename Container>
void expect_bits_equal(const Container& got, const Container& expected, const char* name) {
  ASSERT_EQ(got.size(), expected.size()) << name;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(bits(got[i]), bits(expected[i]))
        << name << "[" << i << "]: " << got[i] << " vs " << expected[i];
}

void expect_same_frame(const JournalFrame& got, const JournalFrame& expected) {
  EXPECT_EQ(got.step, expected.step);
  EXPECT_EQ(got.call, expected.call);
  EXPECT_EQ(got.units, expected.units);
  EXPECT_EQ(got.reference, expected.reference);
  expect_bits_equal(got.cell, expected.cell, "cell");
  expect_bits_equal(got.origin, expected.origin, "origin");
  EXPECT_EQ(got.symbols, expected.symbols);
  EXPECT_EQ(got.ids, expected.ids);
  expect_bits_equal(got.positions, expected.positions, "positions");
  expect_bits_equal(got.forces, expected.forces, "forces");
  EXPECT_EQ(bits(got.energy), bits(expected.energy)) << got.energy << " vs " << expected.energy;
  expect_bits_equal(got.virial, expected.virial, "virial");
  expect_bits_equal(got.uncertainty, expected.uncertainty, "uncertainty");
}

double volume_of(const std::array<double, 9>& c) {
  return std::abs(c[0] * (c[4] * c[8] - c[5] * c[7]) + c[1] * (c[5] * c[6] - c[3] * c[8]) +
                  c[2] * (c[3] * c[7] - c[4] * c[6]));
}

TEST(LabelJournal, RoundTripsFramesBitForBit) {
  TempPath path;
  const JournalFrame with = sample_frame(100, /*with_uncertainty=*/true);
  const JournalFrame without = sample_frame(250, /*with_uncertainty=*/false);
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
  const JournalContents contents = read_label_journal(path.str());
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
  const JournalContents contents = read_label_journal(path.str());
  ASSERT_EQ(contents.frames.size(), 3u);
  for (int i = 0; i < 3; ++i) expect_same_frame(contents.frames[i], sample_frame(i + 1, i == 1));
}

TEST(LabelJournal, FrameCutShortAtAnyByteIsDroppedNeverMisread) {
  TempPath whole;
  const JournalFrame first = sample_frame(10, true);
  const JournalFrame second = sample_frame(20, false);
  LabelJournalWriter writer(whole.str());
  writer.append(first);
  const std::size_t first_end = file_bytes(whole.str()).size();
  writer.append(second);
  const std::string bytes = file_bytes(whole.str());

  TempPath cut;
  for (std::size_t end = first_end; end <= bytes.size(); ++end) {
    SCOPED_TRACE("file cut at byte " + std::to_string(end) + " of " + std::to_string(bytes.size()));
    write_bytes(cut.str(), bytes.substr(0, end));
    JournalContents contents;
    ASSERT_NO_THROW(contents = read_label_journal(cut.str()));
    const bool whole_file = end == bytes.size();
    const bool at_boundary = end == first_end;
    ASSERT_EQ(contents.frames.size(), whole_file ? 2u : 1u);
    EXPECT_EQ(contents.truncated_frames, whole_file || at_boundary ? 0 : 1);
    expect_same_frame(contents.frames[0], first);
    if (whole_file) expect_same_frame(contents.frames[1], second);
  }
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
    const JournalContents contents = read_label_journal(cut.str());
    EXPECT_EQ(contents.truncated_frames, 0);
    ASSERT_EQ(contents.frames.size(), 2u);
    expect_same_frame(contents.frames[0], sample_frame(1, false));
    expect_same_frame(contents.frames[1], sample_frame(3, true));
  }
}

TEST(LabelJournal, MalformedFrameThrowsWithFileAndLine) {
  TempPath path;
  {
    LabelJournalWriter writer(path.str());
    for (int step = 1; step <= 3; ++step) writer.append(sample_frame(step, false));
  }
  const std::string bytes = file_bytes(path.str());
  // Frames are 6 lines long (count, comment, 4 atoms): the middle frame's second atom is line 10.
  std::vector<std::size_t> line_starts = {0};
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] == '\n') line_starts.push_back(i + 1);
  auto replace_line = [&](int line, const std::string& text) {
    const std::size_t begin = line_starts[line - 1];
    const std::size_t end = line_starts[line] - 1;
    return bytes.substr(0, begin) + text + bytes.substr(end);
  };
  ASSERT_EQ(bytes.substr(line_starts[9], 2), "O ");

  struct Case {
    int line;
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {10, "O 4.75 1 2 -1 2 1e-5", "atom line has 7 columns"},
      {10, "O 4.75 1 2 -1 abc 1e-5 5", "'abc' is not a number"},
      {10, "O 4.75 1 nan -1 2 1e-5 5", "'nan' is not finite"},
      {7, "three", "expected the atom count"},
      {8, "Lattice=\"1 0 0 0 1 0 0 0 1\" Properties=species:S:1:pos:R:3:forces:R:3:id:I:1",
       "no energy"},
      {8, "Lattice=\"1 0 0 0 1 0 0 0 1\" Properties=species:S:1:pos:R:3:id:I:1 energy=1",
       "no forces"},
      // A complete last frame is not "cut short": malformed is malformed.
      {18, "Si 1 2 3 4 5 6", "atom line has 7 columns"},
  };
  TempPath broken;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    write_bytes(broken.str(), replace_line(c.line, c.text));
    const std::string message =
        message_of<std::runtime_error>([&] { read_label_journal(broken.str()); });
    EXPECT_CONTAINS(message, broken.str());
    EXPECT_CONTAINS(message, "line " + std::to_string(c.line) + ":");
    EXPECT_CONTAINS(message, c.expected);
  }
}

TEST(LabelJournal, MissingFileThrowsNamingIt) {
  const std::string path = ::testing::TempDir() + "no_such_label_journal.extxyz";
  const std::string message = message_of<std::runtime_error>([&] { read_label_journal(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "No such file or directory");
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

  std::vector<std::pair<JournalFrame, std::string>> cases;
  JournalFrame frame = sample_frame(7, false);
  frame.positions.pop_back();
  cases.emplace_back(frame, "positions has 11 entries, expected 12");
  frame = sample_frame(7, false);
  frame.energy = std::numeric_limits<double>::quiet_NaN();
  cases.emplace_back(frame, "energy has a value that is not finite");
  frame = sample_frame(7, false);
  frame.forces[5] = std::numeric_limits<double>::infinity();
  cases.emplace_back(frame, "forces has a value that is not finite");
  frame = sample_frame(7, false);
  frame.uncertainty = {0.1};
  cases.emplace_back(frame, "uncertainty");
  frame = sample_frame(7, false);
  frame.ids.push_back(99);
  cases.emplace_back(frame, "ids has 5 entries, expected 4");
  frame = sample_frame(7, false);
  frame.symbols[1] = "O 2";
  cases.emplace_back(frame, "symbol of atom 1");
  cases.emplace_back(JournalFrame{}, "no atoms");
  for (const auto& [invalid, expected] : cases) {
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
  const JournalContents contents = read_label_journal(path.str());
  EXPECT_EQ(contents.truncated_frames, 0);
  ASSERT_EQ(contents.frames.size(), 1u);
  expect_same_frame(contents.frames[0], sample_frame(1, false));
}

// tests/training/data/ase_written.extxyz was written by ASE 3.22 (Debian's python3-ase):
// /usr/bin/python3 -c "
// import ase.io; from ase import Atoms; from ase.calculators.singlepoint import
// SinglePointCalculator a = Atoms('SiOO', positions=[[0.1, 0.2, 0.3], [1.5, 0.25, 0.75],
// [0.5, 1.75, 1.25]],
//           cell=[[4.0, 0.0, 0.0], [0.5, 3.5, 0.0], [0.25, 0.75, 3.0]], pbc=True)
// a.calc = SinglePointCalculator(a, energy=-12.5, forces=[[0.5, -0.25, 0.125], [-1.0, 0.75,
//     0.0625], [0.5, -0.5, -0.1875]], stress=[0.01, 0.02, 0.03, 0.004, 0.005, 0.006])
// ase.io.write('ase_written.extxyz', a, format='extxyz')"
TEST(LabelJournal, ReadsFileWrittenByAse) {
  const JournalContents contents = read_label_journal(source_dir() + "/data/ase_written.extxyz");
  ASSERT_EQ(contents.frames.size(), 1u);
  const JournalFrame& frame = contents.frames[0];
  EXPECT_EQ(frame.symbols, (std::vector<std::string>{"Si", "O", "O"}));
  EXPECT_EQ(frame.ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(frame.step, -1);
  EXPECT_EQ(frame.call, 0);
  EXPECT_EQ(frame.units, "");
  EXPECT_TRUE(frame.uncertainty.empty());
  EXPECT_EQ(frame.energy, -12.5);
  EXPECT_EQ(frame.positions,
            (std::vector<double>{0.1, 0.2, 0.3, 1.5, 0.25, 0.75, 0.5, 1.75, 1.25}));
  EXPECT_EQ(frame.forces,
            (std::vector<double>{0.5, -0.25, 0.125, -1.0, 0.75, 0.0625, 0.5, -0.5, -0.1875}));
  EXPECT_EQ(frame.cell, (std::array<double, 9>{4.0, 0.0, 0.0, 0.5, 3.5, 0.0, 0.25, 0.75, 3.0}));
  // virial = -stress * volume; stress xx yy zz yz xz xy = 0.01 0.02 0.03 0.004 0.005 0.006.
  const double volume = 42.0;
  const std::array<double, 6> expected = {-0.01 * volume,  -0.02 * volume,  -0.03 * volume,
                                          -0.006 * volume, -0.005 * volume, -0.004 * volume};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(frame.virial[i], expected[i], 1e-12) << i;
}

TEST(LabelJournal, ReadsOtherToolsKeyNames) {
  TempPath path;
  write_bytes(path.str(),
              "2\n"
              "Lattice=\"2 0 0 0 3 0 0 0 4\" Properties=species:S:1:pos:R:3:Z:I:1:force:R:3 "
              "free_energy=-3.25 stress={1 2 3 4 5 6} config_type=bulk some_flag\n"
              "H 0 0 0 1 0.5 0.25 0.125\n"
              "He 1 1 1 2 -0.5 -0.25 -0.125\n");
  const JournalContents contents = read_label_journal(path.str());
  ASSERT_EQ(contents.frames.size(), 1u);
  const JournalFrame& frame = contents.frames[0];
  EXPECT_EQ(frame.energy, -3.25);
  EXPECT_EQ(frame.symbols, (std::vector<std::string>{"H", "He"}));
  EXPECT_EQ(frame.forces, (std::vector<double>{0.5, 0.25, 0.125, -0.5, -0.25, -0.125}));
  EXPECT_EQ(frame.ids, (std::vector<int64_t>{1, 2}));
  // Voigt xx yy zz yz xz xy = 1 2 3 4 5 6, volume 24; the virial is xx yy zz xy xz yz.
  EXPECT_EQ(frame.virial, (std::array<double, 6>{-24, -48, -72, -144, -120, -96}));
}

TEST(LabelJournal, AseReadsWrittenJournal) {
  // scripts/setup.sh installs python3-ase: without it this check fails instead of passing.
  ASSERT_EQ(std::system("/usr/bin/python3 -c 'import ase' >/dev/null 2>&1"), 0)
      << "/usr/bin/python3 cannot import ase (apt-get install -y python3-ase)";
  TempPath path;
  const std::vector<JournalFrame> frames = {sample_frame(5, true), sample_frame(6, false)};
  {
    LabelJournalWriter writer(path.str());
    for (const JournalFrame& frame : frames) writer.append(frame);
  }
  // Per frame: energy, then forces, stress (Voigt), positions, each on a line of its own.
  const std::string command =
      "/usr/bin/python3 -c \"import ase.io\n"
      "fs = ase.io.read('" +
      path.str() +
      "', index=':')\n"
      "for f in fs:\n"
      "  print(repr(float(f.get_potential_energy())))\n"
      "  for values in (f.get_forces(), f.get_stress(), f.get_positions()):\n"
      "    print(' '.join(repr(float(x)) for x in values.ravel()))\n"
      "\" 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  ASSERT_EQ(::pclose(pipe), 0) << output;

  std::istringstream lines(output);
  auto numbers = [&] {
    std::string line;
    std::getline(lines, line);
    std::istringstream words(line);
    std::vector<double> values;
    std::string word;
    while (words >> word) values.push_back(std::strtod(word.c_str(), nullptr));
    return values;
  };
  for (const JournalFrame& frame : frames) {
    SCOPED_TRACE("step " + std::to_string(frame.step) + ", ASE printed:\n" + output);
    const std::vector<double> energy = numbers();
    ASSERT_EQ(energy.size(), 1u);
    EXPECT_EQ(bits(energy[0]), bits(frame.energy));
    expect_bits_equal(numbers(), frame.forces, "forces");
    const std::vector<double> stress = numbers();
    ASSERT_EQ(stress.size(), 6u);
    const double volume = volume_of(frame.cell);
    const std::array<double, 6> v = frame.virial;  // xx yy zz xy xz yz
    const std::array<double, 6> expected = {-v[0] / volume, -v[1] / volume, -v[2] / volume,
                                            -v[5] / volume, -v[4] / volume, -v[3] / volume};
    for (int i = 0; i < 6; ++i)
      EXPECT_NEAR(stress[i], expected[i], 1e-15 * std::abs(expected[i]) + 1e-300) << i;
    expect_bits_equal(numbers(), frame.positions, "positions");
  }
}

}  // namespace
}  // namespace otf::testing

// The extxyz codec alone: frames round-trip bit for bit through text, a frame cut short at any
// byte is dropped (never misread), malformed and invalid frames are refused with a message that
// says where, and ASE reads our text and we read ASE's files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "extxyz.h"
#include "labelled_frame_samples.h"

namespace otf::testing {
namespace {

// Frames written as text and parsed back, alone and as a file, without the journal.
std::string text_of(const std::vector<LabelledFrame>& frames) {
  std::string text;
  for (const LabelledFrame& frame : frames) text += extxyz_frame_text(frame, "test frame");
  return text;
}

TEST(Extxyz, RoundTripsFramesBitForBit) {
  const LabelledFrame with = sample_frame(100, /*with_uncertainty=*/true);
  const LabelledFrame without = sample_frame(250, /*with_uncertainty=*/false);
  const std::string text = text_of({with, without});
  EXPECT_EQ(text.back(), '\n');
  const ExtxyzContents contents = parse_extxyz_text(text);
  EXPECT_EQ(contents.truncated_frames, 0);
  ASSERT_EQ(contents.frames.size(), 2u);
  expect_same_frame(contents.frames[0], with);
  expect_same_frame(contents.frames[1], without);
  EXPECT_EQ(contents.frames[0].num_atoms(), 4);

  TempPath path;
  write_bytes(path.str(), text);
  const ExtxyzContents from_file = read_extxyz_file(path.str());
  ASSERT_EQ(from_file.frames.size(), 2u);
  expect_same_frame(from_file.frames[0], with);
  expect_same_frame(from_file.frames[1], without);
}

TEST(Extxyz, FrameCutShortAtAnyByteIsDroppedNeverMisread) {
  const LabelledFrame first = sample_frame(10, true);
  const LabelledFrame second = sample_frame(20, false);
  const std::size_t first_end = text_of({first}).size();
  const std::string bytes = text_of({first, second});

  for (std::size_t end = first_end; end <= bytes.size(); ++end) {
    SCOPED_TRACE("text cut at byte " + std::to_string(end) + " of " + std::to_string(bytes.size()));
    const std::string cut = bytes.substr(0, end);
    ExtxyzContents contents;
    ASSERT_NO_THROW(contents = parse_extxyz_text(cut));
    const bool whole_file = end == bytes.size();
    const bool at_boundary = end == first_end;
    ASSERT_EQ(contents.frames.size(), whole_file ? 2u : 1u);
    EXPECT_EQ(contents.truncated_frames, whole_file || at_boundary ? 0 : 1);
    expect_same_frame(contents.frames[0], first);
    if (whole_file) expect_same_frame(contents.frames[1], second);
    std::istringstream in(cut);
    EXPECT_EQ(extxyz_cut_short_tail_offset(in),
              whole_file || at_boundary ? -1 : static_cast<int64_t>(first_end));
  }
}

TEST(Extxyz, MalformedFrameThrowsWithFileAndLine) {
  const std::string bytes =
      text_of({sample_frame(1, false), sample_frame(2, false), sample_frame(3, false)});
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
        message_of<std::runtime_error>([&] { read_extxyz_file(broken.str()); });
    EXPECT_CONTAINS(message, broken.str());
    EXPECT_CONTAINS(message, "line " + std::to_string(c.line) + ":");
    EXPECT_CONTAINS(message, c.expected);
  }
}

TEST(Extxyz, MissingFileThrowsNamingIt) {
  const std::string path = ::testing::TempDir() + "no_such_label_journal.extxyz";
  const std::string message = message_of<std::runtime_error>([&] { read_extxyz_file(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "No such file or directory");
}

TEST(Extxyz, InvalidFramesAreRefusedWithWhere) {
  for (const auto& [invalid, expected] : invalid_frames()) {
    SCOPED_TRACE(expected);
    const std::string message =
        message_of<std::invalid_argument>([&] { extxyz_frame_text(invalid, "frame of step 7"); });
    EXPECT_CONTAINS(message, "frame of step 7: ");
    EXPECT_CONTAINS(message, expected);
  }
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
TEST(Extxyz, ReadsFileWrittenByAse) {
  const ExtxyzContents contents = read_extxyz_file(source_dir() + "/data/ase_written.extxyz");
  ASSERT_EQ(contents.frames.size(), 1u);
  const LabelledFrame& frame = contents.frames[0];
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

TEST(Extxyz, ReadsOtherToolsKeyNames) {
  TempPath path;
  write_bytes(path.str(),
              "2\n"
              "Lattice=\"2 0 0 0 3 0 0 0 4\" Properties=species:S:1:pos:R:3:Z:I:1:force:R:3 "
              "free_energy=-3.25 stress={1 2 3 4 5 6} config_type=bulk some_flag\n"
              "H 0 0 0 1 0.5 0.25 0.125\n"
              "He 1 1 1 2 -0.5 -0.25 -0.125\n");
  const ExtxyzContents contents = read_extxyz_file(path.str());
  ASSERT_EQ(contents.frames.size(), 1u);
  const LabelledFrame& frame = contents.frames[0];
  EXPECT_EQ(frame.energy, -3.25);
  EXPECT_EQ(frame.symbols, (std::vector<std::string>{"H", "He"}));
  EXPECT_EQ(frame.forces, (std::vector<double>{0.5, 0.25, 0.125, -0.5, -0.25, -0.125}));
  EXPECT_EQ(frame.ids, (std::vector<int64_t>{1, 2}));
  // Voigt xx yy zz yz xz xy = 1 2 3 4 5 6, volume 24; the virial is xx yy zz xy xz yz.
  EXPECT_EQ(frame.virial, (std::array<double, 6>{-24, -48, -72, -144, -120, -96}));
}

TEST(Extxyz, AseReadsWrittenText) {
  // scripts/setup.sh installs python3-ase: without it this check fails instead of passing.
  ASSERT_EQ(std::system("/usr/bin/python3 -c 'import ase' >/dev/null 2>&1"), 0)
      << "/usr/bin/python3 cannot import ase (apt-get install -y python3-ase)";
  TempPath path;
  const std::vector<LabelledFrame> frames = {sample_frame(5, true), sample_frame(6, false)};
  write_bytes(path.str(), text_of(frames));
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
  for (const LabelledFrame& frame : frames) {
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

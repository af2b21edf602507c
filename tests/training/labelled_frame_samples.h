// Test support for the extxyz codec and the label journal: scratch files, a labelled frame whose
// numbers %.6g would not round-trip, and bit-for-bit frame comparisons.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "extxyz.h"

namespace otf::testing {

// A file name of its own under the test's temporary directory, removed at the end.
class TempPath {
 public:
  TempPath() {
    static int counter = 0;
    path_ = ::testing::TempDir() + "labelled_frames_" + std::to_string(::getpid()) + "_" +
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

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string source_dir() {
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
inline LabelledFrame sample_frame(int64_t step, bool with_uncertainty) {
  LabelledFrame frame;
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

// Frames extxyz_frame_text refuses, each with a part of its message.
inline std::vector<std::pair<LabelledFrame, std::string>> invalid_frames() {
  std::vector<std::pair<LabelledFrame, std::string>> cases;
  LabelledFrame frame = sample_frame(7, false);
  frame.positions.pop_back();
  cases.emplace_back(frame, "positions has 11 entries, expected 12");
  frame = sample_frame(7, false);
  frame.energy = std::numeric_limits<double>::quiet_NaN();
  cases.emplace_back(frame, "energy has a value that is not finite");
  frame = sample_frame(7, false);
  frame.forces[5] = std::numeric_limits<double>::infinity();
  cases.emplace_back(frame, "forces has a value that is not finite");
  frame = sample_frame(7, false);
  frame.virial[2] = std::numeric_limits<double>::quiet_NaN();
  cases.emplace_back(frame, "virial has a value that is not finite");
  frame = sample_frame(7, false);
  frame.uncertainty = {0.1};
  cases.emplace_back(frame, "uncertainty");
  frame = sample_frame(7, false);
  frame.ids.push_back(99);
  cases.emplace_back(frame, "ids has 5 entries, expected 4");
  frame = sample_frame(7, false);
  frame.symbols[1] = "O 2";
  cases.emplace_back(frame, "symbol of atom 1");
  frame = sample_frame(7, false);
  frame.symbols[2] = "";
  cases.emplace_back(frame, "symbol of atom 2");
  cases.emplace_back(LabelledFrame{}, "no atoms");
  return cases;
}

inline uint64_t bits(double value) {
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

inline void expect_same_frame(const LabelledFrame& got, const LabelledFrame& expected) {
  EXPECT_EQ(got.step, expected.step);
  EXPECT_EQ(got.call, expected.call);
  EXPECT_EQ(got.walker, expected.walker);
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

inline double volume_of(const std::array<double, 9>& c) {
  return std::abs(c[0] * (c[4] * c[8] - c[5] * c[7]) + c[1] * (c[5] * c[6] - c[3] * c[8]) +
                  c[2] * (c[3] * c[7] - c[4] * c[6]));
}

}  // namespace otf::testing

// otf::PeriodicSystem: the binned neighbour list of owned atoms equals a brute-force search over
// periodic images (orthogonal, triclinic, left-handed and smaller-than-cutoff cells), ghosts are
// exact images of their owners, and a diamond crystal has its textbook neighbour shells.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "expect_error.h"
#include "periodic_system.h"

namespace {

using otf::PeriodicConfiguration;
using otf::PeriodicSystem;
using Cell = std::array<std::array<double, 3>, 3>;
// (centre, owner of the neighbour, image vector of the neighbour relative to its owner)
using Pair = std::tuple<int, int, int, int, int>;

std::array<double, 3> cross(const std::array<double, 3>& u, const std::array<double, 3>& v) {
  return {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
}

double dot(const std::array<double, 3>& u, const std::array<double, 3>& v) {
  return u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
}

// Rows d with dual[d] . cell[e] = delta_de.
Cell dual_of(const Cell& cell) {
  const double volume = dot(cell[0], cross(cell[1], cell[2]));
  Cell dual{cross(cell[1], cell[2]), cross(cell[2], cell[0]), cross(cell[0], cell[1])};
  for (auto& row : dual)
    for (auto& x : row) x /= volume;
  return dual;
}

std::array<double, 3> fractional(const Cell& cell, const double* r) {
  const Cell dual = dual_of(cell);
  const std::array<double, 3> position{r[0], r[1], r[2]};
  return {dot(dual[0], position), dot(dual[1], position), dot(dual[2], position)};
}

// Random atoms anywhere (fractional coordinates in [-2, 3)), so wrapping is exercised.
PeriodicConfiguration random_configuration(const Cell& cell, int atoms, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> uniform(-2.0, 3.0);
  PeriodicConfiguration configuration;
  configuration.cell = cell;
  for (int i = 0; i < atoms; ++i) {
    const double f[3] = {uniform(generator), uniform(generator), uniform(generator)};
    for (int k = 0; k < 3; ++k)
      configuration.positions.push_back(f[0] * cell[0][k] + f[1] * cell[1][k] + f[2] * cell[2][k]);
    configuration.species.push_back(i % 3);
  }
  return configuration;
}

// O(N^2 x images) over the wrapped owned positions.
std::set<Pair> brute_force_pairs(const PeriodicSystem& system, const Cell& cell, double cutoff) {
  const Cell dual = dual_of(cell);
  std::array<int, 3> range{};
  for (int d = 0; d < 3; ++d)
    range[d] = static_cast<int>(std::ceil(cutoff * std::sqrt(dot(dual[d], dual[d])))) + 1;
  const auto& x = system.positions();
  std::set<Pair> pairs;
  for (int i = 0; i < system.num_local(); ++i)
    for (int j = 0; j < system.num_local(); ++j)
      for (int a = -range[0]; a <= range[0]; ++a)
        for (int b = -range[1]; b <= range[1]; ++b)
          for (int c = -range[2]; c <= range[2]; ++c) {
            if (i == j && a == 0 && b == 0 && c == 0) continue;
            double distance_squared = 0.0;
            for (int k = 0; k < 3; ++k) {
              const double delta =
                  x[3 * j + k] + a * cell[0][k] + b * cell[1][k] + c * cell[2][k] - x[3 * i + k];
              distance_squared += delta * delta;
            }
            if (distance_squared < cutoff * cutoff) pairs.emplace(i, j, a, b, c);
          }
  return pairs;
}

// The system's list as pairs; checks on the way that every ghost is an exact lattice image.
std::set<Pair> listed_pairs(const PeriodicSystem& system, const Cell& cell) {
  const auto view = system.view();
  const auto& x = system.positions();
  std::set<Pair> pairs;
  for (int n = 0; n < view.num_centers; ++n) {
    const int i = view.centers[n];
    for (int m = 0; m < view.neighbor_counts[n]; ++m) {
      const int k = view.neighbors[n][m] & view.neighbor_index_mask;
      const int j = system.owner()[k];
      double delta[3];
      for (int d = 0; d < 3; ++d) delta[d] = x[3 * k + d] - x[3 * j + d];
      const auto image = fractional(cell, delta);
      std::array<int, 3> rounded{};
      for (int d = 0; d < 3; ++d) {
        rounded[d] = static_cast<int>(std::lround(image[d]));
        EXPECT_NEAR(image[d], rounded[d], 1e-9) << "ghost " << k << " is not an image of " << j;
      }
      EXPECT_EQ(view.species[k], view.species[j]);
      const bool inserted = pairs.emplace(i, j, rounded[0], rounded[1], rounded[2]).second;
      EXPECT_TRUE(inserted) << "pair listed twice: centre " << i << ", atom " << k;
    }
  }
  return pairs;
}

void expect_matches_brute_force(const Cell& cell, int atoms, double cutoff, uint64_t seed) {
  const auto configuration = random_configuration(cell, atoms, seed);
  const PeriodicSystem system(configuration, cutoff);
  ASSERT_EQ(system.num_local(), atoms);

  // Owned atoms are wrapped into the cell, by a lattice vector.
  for (int i = 0; i < atoms; ++i) {
    const auto f = fractional(cell, &system.positions()[3 * i]);
    double delta[3];
    for (int k = 0; k < 3; ++k)
      delta[k] = system.positions()[3 * i + k] - configuration.positions[3 * i + k];
    const auto shift = fractional(cell, delta);
    for (int d = 0; d < 3; ++d) {
      EXPECT_GE(f[d], -1e-12);
      EXPECT_LT(f[d], 1.0 + 1e-12);
      EXPECT_NEAR(shift[d], std::round(shift[d]), 1e-9);
    }
  }

  const auto expected = brute_force_pairs(system, cell, cutoff);
  const auto listed = listed_pairs(system, cell);
  EXPECT_EQ(listed, expected);
  // Per-atom counts too (a set comparison alone would hide a duplicate).
  std::vector<int> counts(atoms, 0);
  for (const auto& pair : expected) ++counts[std::get<0>(pair)];
  const auto view = system.view();
  for (int i = 0; i < atoms; ++i) EXPECT_EQ(view.neighbor_counts[i], counts[i]) << "atom " << i;
  EXPECT_NEAR(system.average_neighbors(), static_cast<double>(expected.size()) / atoms, 1e-12);
}

TEST(PeriodicSystem, OrthogonalCellMatchesBruteForce) {
  expect_matches_brute_force({{{7.0, 0.0, 0.0}, {0.0, 8.0, 0.0}, {0.0, 0.0, 9.5}}}, 60, 3.2, 1);
}

TEST(PeriodicSystem, TriclinicCellMatchesBruteForce) {
  expect_matches_brute_force({{{8.0, 0.0, 0.0}, {2.5, 7.0, 0.0}, {-1.8, 1.4, 7.5}}}, 70, 3.5, 2);
}

TEST(PeriodicSystem, RotatedLeftHandedCellMatchesBruteForce) {
  expect_matches_brute_force({{{0.0, 6.0, 1.0}, {5.5, 0.5, 0.0}, {1.0, 1.0, -6.5}}}, 50, 3.0, 3);
}

TEST(PeriodicSystem, CutoffBeyondHalfTheCellMatchesBruteForce) {
  // Heights ~3.7 A, cutoff 5: several images of each atom, including of the centre itself.
  expect_matches_brute_force({{{4.0, 0.0, 0.0}, {1.0, 3.8, 0.0}, {0.5, -0.7, 4.2}}}, 6, 5.0, 4);
}

TEST(PeriodicSystem, SingleAtomSeesOnlyItsOwnImages) {
  PeriodicConfiguration configuration;
  configuration.cell = {{{3.0, 0.0, 0.0}, {0.0, 3.0, 0.0}, {0.0, 0.0, 3.0}}};
  configuration.positions = {-0.2, 10.0, 1.0};
  configuration.species = {0};
  const PeriodicSystem system(configuration, 3.1);
  // Simple cubic lattice: 6 images at 3 A, none other below 3.1.
  EXPECT_EQ(system.view().neighbor_counts[0], 6);
  for (int m = 0; m < 6; ++m) EXPECT_NE(system.view().neighbors[0][m], 0);
  expect_matches_brute_force(configuration.cell, 1, 4.3, 5);  // + 12 at 4.24 A
}

TEST(PeriodicSystem, ViewPointsAtTheSystem) {
  const Cell cell{{{6.0, 0.0, 0.0}, {0.0, 6.0, 0.0}, {0.0, 0.0, 6.0}}};
  const PeriodicSystem system(random_configuration(cell, 20, 6), 2.5);
  const auto view = system.view();
  EXPECT_EQ(view.num_atoms, system.num_atoms());
  EXPECT_GT(view.num_atoms, view.num_local);
  EXPECT_EQ(view.num_local, 20);
  EXPECT_EQ(view.num_centers, 20);
  EXPECT_EQ(view.positions, system.positions().data());
  EXPECT_EQ(view.neighbor_index_mask, ~0);
  for (int n = 0; n < view.num_centers; ++n) EXPECT_EQ(view.centers[n], n);
  for (int i = 0; i < view.num_atoms; ++i) {
    EXPECT_EQ(view.species[i], system.owner()[i] % 3);
    if (i < view.num_local) {
      EXPECT_EQ(system.owner()[i], i);
    }
  }
  // Ghosts lie within the cutoff of the cell (fractional reach 2.5 / 6 per direction).
  for (int i = view.num_local; i < view.num_atoms; ++i)
    for (int k = 0; k < 3; ++k) {
      EXPECT_GE(view.positions[3 * i + k], -2.5 - 1e-9);
      EXPECT_LE(view.positions[3 * i + k], 8.5 + 1e-9);
    }
}

TEST(PeriodicSystem, FoldOntoOwnersSumsImages) {
  const Cell cell{{{5.0, 0.0, 0.0}, {1.0, 5.0, 0.0}, {0.0, 0.0, 5.0}}};
  const PeriodicSystem system(random_configuration(cell, 10, 7), 3.0);
  std::vector<double> per_atom(3 * system.num_atoms());
  std::vector<double> expected(3 * system.num_local(), 0.0);
  std::vector<int> images(system.num_local(), 0);
  for (int i = 0; i < system.num_atoms(); ++i) ++images[system.owner()[i]];
  for (int i = 0; i < system.num_atoms(); ++i) {
    per_atom[3 * i] = 1.0;
    per_atom[3 * i + 1] = i;
    per_atom[3 * i + 2] = -0.5;
  }
  for (int i = 0; i < system.num_atoms(); ++i) expected[3 * system.owner()[i] + 1] += i;
  const auto folded = system.fold_onto_owners(per_atom);
  ASSERT_EQ(folded.size(), 3u * system.num_local());
  for (int j = 0; j < system.num_local(); ++j) {
    EXPECT_EQ(folded[3 * j], images[j]);
    EXPECT_EQ(folded[3 * j + 1], expected[3 * j + 1]);
    EXPECT_EQ(folded[3 * j + 2], -0.5 * images[j]);
  }
  otf::testing::expect_error<std::invalid_argument>(
      [&] { system.fold_onto_owners(std::vector<double>(3 * system.num_local())); },
      {"fold_onto_owners", std::to_string(system.num_atoms())});
}

TEST(PeriodicSystem, RejectsBadInput) {
  PeriodicConfiguration configuration;
  configuration.cell = {{{3.0, 0.0, 0.0}, {0.0, 3.0, 0.0}, {6.0, 6.0, 0.0}}};
  configuration.positions = {0.0, 0.0, 0.0};
  configuration.species = {0};
  otf::testing::expect_error<std::invalid_argument>([&] { PeriodicSystem(configuration, 2.0); },
                                                    {"degenerate"});
  configuration.cell = {{{3.0, 0.0, 0.0}, {0.0, 3.0, 0.0}, {0.0, 0.0, 3.0}}};
  configuration.positions = {0.0, 0.0};
  otf::testing::expect_error<std::invalid_argument>([&] { PeriodicSystem(configuration, 2.0); },
                                                    {"positions", "3 per atom"});
  configuration.positions = {0.0, 0.0, 0.0};
  otf::testing::expect_error<std::invalid_argument>([&] { PeriodicSystem(configuration, 0.0); },
                                                    {"cutoff", "> 0"});
}

// Distance from atom i to each of its listed neighbours.
std::vector<double> neighbor_distances(const PeriodicSystem& system, int i) {
  const auto view = system.view();
  std::vector<double> distances;
  for (int m = 0; m < view.neighbor_counts[i]; ++m) {
    const int k = view.neighbors[i][m];
    double squared = 0.0;
    for (int d = 0; d < 3; ++d) {
      const double delta = view.positions[3 * k + d] - view.positions[3 * i + d];
      squared += delta * delta;
    }
    distances.push_back(std::sqrt(squared));
  }
  return distances;
}

TEST(DiamondCrystal, HasTheTextbookNeighbourShells) {
  constexpr double a = 5.431;  // silicon
  for (const int n : {1, 2, 3}) {
    for (const double jitter : {0.0, 0.05}) {
      const auto crystal = otf::diamond_crystal(n, a, jitter, 11);
      ASSERT_EQ(crystal.num_atoms(), 8 * n * n * n);
      EXPECT_EQ(crystal.cell[0][0], n * a);
      EXPECT_EQ(crystal.cell[0][1], 0.0);
      EXPECT_EQ(crystal.cell[2][2], n * a);
      // First shell at a sqrt(3)/4 = 2.35 A (4 atoms), second at a/sqrt(2) = 3.84 A (12 atoms),
      // third at a sqrt(11)/4 = 4.50 A.
      const PeriodicSystem first(crystal, 2.5);
      const PeriodicSystem second(crystal, 4.0);
      for (int i = 0; i < crystal.num_atoms(); ++i) {
        ASSERT_EQ(first.view().neighbor_counts[i], 4) << "n " << n << " atom " << i;
        ASSERT_EQ(second.view().neighbor_counts[i], 16) << "n " << n << " atom " << i;
      }
      EXPECT_EQ(first.average_neighbors(), 4.0);
      EXPECT_EQ(second.average_neighbors(), 16.0);
      if (jitter == 0.0) {
        for (const double r : neighbor_distances(first, 0))
          EXPECT_NEAR(r, a * std::sqrt(3.0) / 4, 1e-9);
      }
    }
  }
}

TEST(DiamondCrystal, JitterIsSeededAndBounded) {
  const auto perfect = otf::diamond_crystal(2, 5.431, 0.0, 1);
  const auto jittered = otf::diamond_crystal(2, 5.431, 0.1, 1);
  const auto again = otf::diamond_crystal(2, 5.431, 0.1, 1);
  const auto other = otf::diamond_crystal(2, 5.431, 0.1, 2);
  EXPECT_EQ(jittered.positions, again.positions);
  EXPECT_NE(jittered.positions, other.positions);
  double largest = 0.0;
  for (size_t k = 0; k < perfect.positions.size(); ++k) {
    const double shift = std::abs(jittered.positions[k] - perfect.positions[k]);
    EXPECT_LE(shift, 0.1);
    largest = std::max(largest, shift);
  }
  EXPECT_GT(largest, 0.05);
  for (const int s : jittered.species) EXPECT_EQ(s, 0);
  otf::testing::expect_error<std::invalid_argument>([] { otf::diamond_crystal(0, 5.431, 0.0, 1); },
                                                    {"cells_per_side", "0"});
  otf::testing::expect_error<std::invalid_argument>([] { otf::diamond_crystal(1, -1.0, 0.0, 1); },
                                                    {"lattice constant"});
}

TEST(DiamondCrystal, LargeCrystalBuildsQuickly) {
  const auto crystal = otf::diamond_crystal(16, 5.431, 0.02, 3);
  ASSERT_EQ(crystal.num_atoms(), 32768);
  const auto start = std::chrono::steady_clock::now();
  const PeriodicSystem system(crystal, 6.0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(system.num_local(), 32768);
  EXPECT_GT(system.num_atoms(), 32768);
  // 4 + 12 + 12 (4.50 A) + 6 (5.43 A) + 12 (5.92 A) within 6 A.
  EXPECT_NEAR(system.average_neighbors(), 46.0, 1e-9);
  // Generous for sanitizer builds; a Release build takes a fraction of this.
  EXPECT_LT(seconds, 2.0) << "neighbour list of 32768 atoms took " << seconds << " s";
  RecordProperty("seconds", std::to_string(seconds));
}

}  // namespace

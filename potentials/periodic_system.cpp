// Periodic configuration -> owned atoms + explicit ghost images + binned full neighbour list, the
// layout LAMMPS hands a pair style. Ghosts make every neighbour search non-periodic, so the bins
// need no wrap-around and small cells (cutoff > half the cell) need no special case.
#include "periodic_system.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace otf {
namespace {

using Vec3 = std::array<double, 3>;
using Mat3 = std::array<Vec3, 3>;

Vec3 cross(const Vec3& u, const Vec3& v) {
  return {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
}

double dot(const Vec3& u, const Vec3& v) { return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]; }

double norm(const Vec3& u) { return std::sqrt(dot(u, u)); }

// Cartesian position of fractional coordinates: r = f_a a + f_b b + f_c c.
Vec3 to_cartesian(const Mat3& cell, const Vec3& fractional) {
  Vec3 r{};
  for (int d = 0; d < 3; ++d)
    for (int k = 0; k < 3; ++k) r[k] += fractional[d] * cell[d][k];
  return r;
}

}  // namespace

PeriodicSystem::PeriodicSystem(const PeriodicConfiguration& configuration, double list_cutoff) {
  const int num_owned = configuration.num_atoms();
  if (configuration.positions.size() != 3 * configuration.species.size())
    throw std::invalid_argument("PeriodicSystem: positions hold " +
                                std::to_string(configuration.positions.size()) + " numbers for " +
                                std::to_string(num_owned) + " atoms (expected 3 per atom)");
  if (!std::isfinite(list_cutoff) || list_cutoff <= 0.0)
    throw std::invalid_argument("PeriodicSystem: list cutoff must be a finite number > 0, got " +
                                std::to_string(list_cutoff));
  const Mat3& cell = configuration.cell;
  // Reciprocal rows: dual[d] . cell[e] = delta_de, so f_d = dual[d] . r, and the distance between
  // the lattice planes of direction d is height[d] = 1 / |dual[d]|.
  const double volume = dot(cell[0], cross(cell[1], cell[2]));
  const double scale = norm(cell[0]) * norm(cell[1]) * norm(cell[2]);
  if (!std::isfinite(volume) || !(std::abs(volume) > 1e-12 * scale))
    throw std::invalid_argument("PeriodicSystem: the cell is degenerate (volume " +
                                std::to_string(volume) +
                                "); its rows must be 3 independent vectors");
  Mat3 dual{};
  dual[0] = cross(cell[1], cell[2]);
  dual[1] = cross(cell[2], cell[0]);
  dual[2] = cross(cell[0], cell[1]);
  for (auto& row : dual)
    for (auto& x : row) x /= volume;
  Vec3 reach{};  // list_cutoff in fractional units of each direction
  std::array<int, 3> max_image{};
  for (int d = 0; d < 3; ++d) {
    reach[d] = list_cutoff * norm(dual[d]);
    max_image[d] = static_cast<int>(std::ceil(reach[d]));
  }

  // Owned atoms, wrapped into the cell.
  num_local_ = num_owned;
  std::vector<Vec3> fractional(num_owned);
  for (int i = 0; i < num_owned; ++i) {
    const Vec3 r{configuration.positions[3 * i], configuration.positions[3 * i + 1],
                 configuration.positions[3 * i + 2]};
    for (int d = 0; d < 3; ++d) {
      double f = dot(dual[d], r);
      f -= std::floor(f);
      if (f >= 1.0) f = 0.0;  // -1e-17 - floor(-1e-17) rounds to exactly 1
      fractional[i][d] = f;
    }
    const Vec3 wrapped = to_cartesian(cell, fractional[i]);
    positions_.insert(positions_.end(), wrapped.begin(), wrapped.end());
    species_.push_back(configuration.species[i]);
    owner_.push_back(i);
  }

  // Ghost images: every image whose fractional coordinates lie within `reach` of the cell. A
  // neighbour of an owned atom differs from it by at most `reach` in each fractional coordinate
  // (|df_d| = |dual[d] . dr| <= list_cutoff |dual[d]|), so this set is complete.
  for (int i = 0; i < num_owned; ++i) {
    std::array<int, 3> low{}, high{};
    for (int d = 0; d < 3; ++d) {
      low[d] = std::max(-max_image[d], static_cast<int>(std::ceil(-reach[d] - fractional[i][d])));
      high[d] = std::min(max_image[d] + 1,
                         static_cast<int>(std::floor(1.0 + reach[d] - fractional[i][d])));
    }
    for (int a = low[0]; a <= high[0]; ++a)
      for (int b = low[1]; b <= high[1]; ++b)
        for (int c = low[2]; c <= high[2]; ++c) {
          if (a == 0 && b == 0 && c == 0) continue;
          const Vec3 image{fractional[i][0] + a, fractional[i][1] + b, fractional[i][2] + c};
          const Vec3 r = to_cartesian(cell, image);
          positions_.insert(positions_.end(), r.begin(), r.end());
          species_.push_back(configuration.species[i]);
          owner_.push_back(i);
        }
  }
  const int total = num_atoms();

  // Cartesian bins at least list_cutoff wide over the bounding box of all atoms: the neighbours
  // of an atom lie in its own bin or the 26 around it.
  Vec3 lower{}, upper{};
  lower.fill(std::numeric_limits<double>::max());
  upper.fill(std::numeric_limits<double>::lowest());
  for (int i = 0; i < total; ++i)
    for (int k = 0; k < 3; ++k) {
      lower[k] = std::min(lower[k], positions_[3 * i + k]);
      upper[k] = std::max(upper[k], positions_[3 * i + k]);
    }
  std::array<int64_t, 3> bins{1, 1, 1};
  // A tiny cutoff in a large box must not allocate more bins than atoms: widen all bins alike.
  const int64_t max_bins = std::max<int64_t>(64, 2 * static_cast<int64_t>(total));
  for (int k = 0; k < 3 && total > 0; ++k)
    bins[k] = std::clamp<int64_t>(
        static_cast<int64_t>(std::min((upper[k] - lower[k]) / list_cutoff, 1e15)), 1, max_bins);
  while (bins[0] * bins[1] * bins[2] > max_bins)
    for (auto& n : bins) n = std::max<int64_t>(1, n / 2);
  Vec3 inverse_width{};
  for (int k = 0; k < 3; ++k) {
    const double width =
        std::max((upper[k] - lower[k]) / static_cast<double>(bins[k]), list_cutoff);
    inverse_width[k] = 1.0 / width;
  }
  auto bin_coordinate = [&](int atom, int k) {
    const auto b = static_cast<int64_t>((positions_[3 * atom + k] - lower[k]) * inverse_width[k]);
    return std::clamp<int64_t>(b, 0, bins[k] - 1);
  };
  auto bin_index = [&](int64_t x, int64_t y, int64_t z) { return (x * bins[1] + y) * bins[2] + z; };

  // Counting sort of the atoms by bin (compressed rows: bin_start[b] .. bin_start[b + 1]).
  const int64_t num_bins = bins[0] * bins[1] * bins[2];
  std::vector<int> atom_bin(total);
  std::vector<int> bin_start(num_bins + 1, 0);
  for (int i = 0; i < total; ++i) {
    atom_bin[i] = static_cast<int>(
        bin_index(bin_coordinate(i, 0), bin_coordinate(i, 1), bin_coordinate(i, 2)));
    ++bin_start[atom_bin[i] + 1];
  }
  for (int64_t b = 0; b < num_bins; ++b) bin_start[b + 1] += bin_start[b];
  std::vector<int> binned_atoms(total);
  {
    std::vector<int> fill(bin_start.begin(), bin_start.end() - 1);
    for (int i = 0; i < total; ++i) binned_atoms[fill[atom_bin[i]]++] = i;
  }

  const double cutoff_squared = list_cutoff * list_cutoff;
  centers_.resize(num_local_);
  neighbor_counts_.resize(num_local_);
  neighbor_storage_.resize(num_local_);
  neighbor_pointers_.resize(num_local_);
  for (int i = 0; i < num_local_; ++i) {
    centers_[i] = i;
    std::vector<int>& neighbors = neighbor_storage_[i];
    const int64_t bx = bin_coordinate(i, 0), by = bin_coordinate(i, 1), bz = bin_coordinate(i, 2);
    for (int64_t x = std::max<int64_t>(0, bx - 1); x <= std::min(bins[0] - 1, bx + 1); ++x)
      for (int64_t y = std::max<int64_t>(0, by - 1); y <= std::min(bins[1] - 1, by + 1); ++y)
        for (int64_t z = std::max<int64_t>(0, bz - 1); z <= std::min(bins[2] - 1, bz + 1); ++z) {
          const int64_t b = bin_index(x, y, z);
          for (int slot = bin_start[b]; slot < bin_start[b + 1]; ++slot) {
            const int j = binned_atoms[slot];
            if (j == i) continue;
            double distance_squared = 0.0;
            for (int k = 0; k < 3; ++k) {
              const double delta = positions_[3 * j + k] - positions_[3 * i + k];
              distance_squared += delta * delta;
            }
            if (distance_squared < cutoff_squared) neighbors.push_back(j);
          }
        }
    // Ascending indices: the list does not depend on the bin layout.
    std::sort(neighbors.begin(), neighbors.end());
    neighbor_counts_[i] = static_cast<int>(neighbors.size());
    neighbor_pointers_[i] = neighbors.data();
  }
}

AtomicSystemView PeriodicSystem::view() const {
  AtomicSystemView view;
  view.num_atoms = num_atoms();
  view.num_local = num_local_;
  view.positions = positions_.data();
  view.species = species_.data();
  view.num_centers = num_local_;
  view.centers = centers_.data();
  view.neighbor_counts = neighbor_counts_.data();
  view.neighbors = neighbor_pointers_.data();
  return view;
}

std::vector<double> PeriodicSystem::fold_onto_owners(
    const std::vector<double>& per_atom_xyz) const {
  if (per_atom_xyz.size() != 3 * static_cast<size_t>(num_atoms()))
    throw std::invalid_argument("PeriodicSystem::fold_onto_owners: got " +
                                std::to_string(per_atom_xyz.size()) + " numbers, expected 3 x " +
                                std::to_string(num_atoms()) + " atoms");
  std::vector<double> folded(3 * static_cast<size_t>(num_local_), 0.0);
  for (int i = 0; i < num_atoms(); ++i)
    for (int k = 0; k < 3; ++k) folded[3 * owner_[i] + k] += per_atom_xyz[3 * i + k];
  return folded;
}

double PeriodicSystem::average_neighbors() const {
  if (num_local_ == 0) return 0.0;
  int64_t total = 0;
  for (const int count : neighbor_counts_) total += count;
  return static_cast<double>(total) / num_local_;
}

PeriodicConfiguration diamond_crystal(int cells_per_side, double lattice_constant, double jitter,
                                      uint64_t seed) {
  if (cells_per_side < 1)
    throw std::invalid_argument("diamond_crystal: cells_per_side must be >= 1, got " +
                                std::to_string(cells_per_side));
  if (!std::isfinite(lattice_constant) || lattice_constant <= 0.0)
    throw std::invalid_argument("diamond_crystal: lattice constant must be > 0, got " +
                                std::to_string(lattice_constant));
  if (!std::isfinite(jitter) || jitter < 0.0)
    throw std::invalid_argument("diamond_crystal: jitter must be >= 0, got " +
                                std::to_string(jitter));
  // The conventional cell: fcc sites and the same shifted by a quarter of the body diagonal.
  static constexpr double kBasis[8][3] = {
      {0.0, 0.0, 0.0},    {0.0, 0.5, 0.5},    {0.5, 0.0, 0.5},    {0.5, 0.5, 0.0},
      {0.25, 0.25, 0.25}, {0.25, 0.75, 0.75}, {0.75, 0.25, 0.75}, {0.75, 0.75, 0.25}};
  PeriodicConfiguration configuration;
  const double length = cells_per_side * lattice_constant;
  configuration.cell = {{{length, 0.0, 0.0}, {0.0, length, 0.0}, {0.0, 0.0, length}}};
  std::mt19937_64 generator(seed);
  // Uniform in [-1, 1) from the top 53 bits: the same numbers with every standard library
  // (std::uniform_real_distribution's algorithm is implementation-defined).
  auto symmetric_uniform = [&generator] {
    return 2.0 * static_cast<double>(generator() >> 11) * 0x1.0p-53 - 1.0;
  };
  for (int x = 0; x < cells_per_side; ++x)
    for (int y = 0; y < cells_per_side; ++y)
      for (int z = 0; z < cells_per_side; ++z)
        for (const auto& site : kBasis) {
          const double cell_origin[3] = {static_cast<double>(x), static_cast<double>(y),
                                         static_cast<double>(z)};
          for (int k = 0; k < 3; ++k)
            configuration.positions.push_back((cell_origin[k] + site[k]) * lattice_constant +
                                              jitter * symmetric_uniform());
          configuration.species.push_back(0);
        }
  return configuration;
}

}  // namespace otf

#include "frame_gather.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace otf {
namespace {

std::vector<int> scaled(const std::vector<int>& values, int factor) {
  std::vector<int> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i] * factor;
  return out;
}

}  // namespace

FrameGather::FrameGather(const ReferenceConfiguration& configuration, MPI_Comm world)
    : world_(world), num_local_(configuration.num_local) {
  int ranks = 1;
  MPI_Comm_rank(world_, &rank_);
  MPI_Comm_size(world_, &ranks);
  if (rank_ == 0) counts_.assign(static_cast<std::size_t>(ranks), 0);
  MPI_Gather(&num_local_, 1, MPI_INT, counts_.data(), 1, MPI_INT, 0, world_);
  int total = 0;
  if (rank_ == 0) {
    offsets_.assign(counts_.size(), 0);
    for (std::size_t r = 0; r < counts_.size(); ++r) {
      offsets_[r] = total;
      total += counts_[r];
    }
  }
  std::vector<int64_t> gathered_ids(static_cast<std::size_t>(total));
  std::vector<int> gathered_types(static_cast<std::size_t>(total));
  std::vector<double> gathered_positions(3 * static_cast<std::size_t>(total));
  MPI_Gatherv(configuration.ids, num_local_, MPI_INT64_T, gathered_ids.data(), counts_.data(),
              offsets_.data(), MPI_INT64_T, 0, world_);
  MPI_Gatherv(configuration.types, num_local_, MPI_INT, gathered_types.data(), counts_.data(),
              offsets_.data(), MPI_INT, 0, world_);
  const std::vector<int> counts3 = scaled(counts_, 3), offsets3 = scaled(offsets_, 3);
  MPI_Gatherv(configuration.positions, 3 * num_local_, MPI_DOUBLE, gathered_positions.data(),
              counts3.data(), offsets3.data(), MPI_DOUBLE, 0, world_);
  if (rank_ != 0) return;

  gathered_index_of_sorted_.resize(static_cast<std::size_t>(total));
  std::iota(gathered_index_of_sorted_.begin(), gathered_index_of_sorted_.end(), int64_t{0});
  std::sort(gathered_index_of_sorted_.begin(), gathered_index_of_sorted_.end(),
            [&](int64_t a, int64_t b) {
              return gathered_ids[static_cast<std::size_t>(a)] <
                     gathered_ids[static_cast<std::size_t>(b)];
            });
  ids_.resize(static_cast<std::size_t>(total));
  types_.resize(ids_.size());
  positions_.resize(3 * ids_.size());
  for (std::size_t n = 0; n < ids_.size(); ++n) {
    const auto g = static_cast<std::size_t>(gathered_index_of_sorted_[n]);
    ids_[n] = gathered_ids[g];
    types_[n] = gathered_types[g];
    for (int d = 0; d < 3; ++d)
      positions_[3 * n + static_cast<std::size_t>(d)] =
          gathered_positions[3 * g + static_cast<std::size_t>(d)];
    if (n > 0 && ids_[n] == ids_[n - 1])
      throw std::runtime_error("atom ID " + std::to_string(ids_[n]) +
                               " is held twice: a whole frame needs unique atom IDs");
  }
}

std::vector<double> FrameGather::gather(const double* owned_values, int width) const {
  const std::size_t w = static_cast<std::size_t>(width);
  std::vector<double> gathered(rank_ == 0 ? ids_.size() * w : 0);
  const std::vector<int> counts = scaled(counts_, width), offsets = scaled(offsets_, width);
  MPI_Gatherv(owned_values, num_local_ * width, MPI_DOUBLE, gathered.data(), counts.data(),
              offsets.data(), MPI_DOUBLE, 0, world_);
  if (rank_ != 0) return {};
  std::vector<double> sorted(gathered.size());
  for (std::size_t n = 0; n < ids_.size(); ++n) {
    const auto g = static_cast<std::size_t>(gathered_index_of_sorted_[n]);
    std::copy_n(gathered.begin() + static_cast<std::ptrdiff_t>(g * w), w,
                sorted.begin() + static_cast<std::ptrdiff_t>(n * w));
  }
  return sorted;
}

std::vector<double> FrameGather::scatter(const std::vector<double>& whole, int width) const {
  const std::size_t w = static_cast<std::size_t>(width);
  std::vector<double> gathered;
  if (rank_ == 0) {
    if (whole.size() != ids_.size() * w)
      throw std::logic_error("FrameGather::scatter: wrong number of values");
    gathered.resize(whole.size());
    for (std::size_t n = 0; n < ids_.size(); ++n) {
      const auto g = static_cast<std::size_t>(gathered_index_of_sorted_[n]);
      std::copy_n(whole.begin() + static_cast<std::ptrdiff_t>(n * w), w,
                  gathered.begin() + static_cast<std::ptrdiff_t>(g * w));
    }
  }
  std::vector<double> owned(static_cast<std::size_t>(num_local_) * w);
  const std::vector<int> counts = scaled(counts_, width), offsets = scaled(offsets_, width);
  MPI_Scatterv(gathered.data(), counts.data(), offsets.data(), MPI_DOUBLE, owned.data(),
               num_local_ * width, MPI_DOUBLE, 0, world_);
  return owned;
}

}  // namespace otf

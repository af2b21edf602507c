#include "walker_exchange.h"

#include <climits>
#include <stdexcept>

#include "rank_agreement.h"

namespace otf {
namespace {

// Every root's bytes to every root, in walker order (MPI counts are ints: a frame's text is far
// below 2 GB).
std::vector<std::string> all_gather_text(const std::string& mine, MPI_Comm roots, int walkers) {
  if (mine.size() > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error("a label too large to share between walkers");
  const int size = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<std::size_t>(walkers));
  MPI_Allgather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, roots);
  std::vector<int> offsets(static_cast<std::size_t>(walkers), 0);
  long long total = 0;
  for (int w = 0; w < walkers; ++w) {
    offsets[static_cast<std::size_t>(w)] = static_cast<int>(total);
    total += sizes[static_cast<std::size_t>(w)];
  }
  if (total > INT_MAX) throw std::runtime_error("the walkers' labels are too large to share");
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR,
                 roots);
  std::vector<std::string> texts;
  for (int w = 0; w < walkers; ++w)
    texts.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(w)]),
                               static_cast<std::size_t>(sizes[static_cast<std::size_t>(w)])));
  return texts;
}

}  // namespace

std::string walker_file_path(const std::string& path, const WalkerLayout& layout) {
  if (layout.walkers <= 1 || path.empty()) return path;
  const std::string tag = ".walker" + std::to_string(layout.walker);
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  const bool has_extension =
      dot != std::string::npos && dot > 0 && (slash == std::string::npos || dot > slash + 1);
  return has_extension ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
}

WalkerExchange::WalkerExchange(const WalkerLayout& layout, MPI_Comm world) :
    layout_(layout), world_(world) {
  MPI_Comm_rank(world_, &rank_);
  if (!shared()) return;
  int ranks = 0;
  MPI_Comm_size(world_, &ranks);
  int low = ranks, high = ranks;
  if (rank_ == 0) {
    MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_INT, MPI_MIN, layout_.roots);
    MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_INT, MPI_MAX, layout_.roots);
  }
  MPI_Bcast(&low, 1, MPI_INT, 0, world_);
  MPI_Bcast(&high, 1, MPI_INT, 0, world_);
  // Walkers learn a label split over their ranks in the same way only with as many ranks each.
  if (low != high)
    throw std::invalid_argument("the walkers (partitions) have " + std::to_string(low) + " to " +
                                std::to_string(high) +
                                " ranks; walkers that train one model need as many ranks each "
                                "(-partition MxK)");
}

WalkerRound WalkerExchange::round(const LabelledFrame* label, bool at_step_end,
                                  const std::string& stop_reason, int64_t next_label_step) {
  WalkerRound result;
  if (!shared()) {
    if (label != nullptr && rank_ == 0) {
      result.frames.push_back(*label);
      result.frame_walkers.push_back(0);
    }
    result.frame_count = label != nullptr ? 1 : 0;
    MPI_Bcast(&result.frame_count, 1, MPI_INT64_T, 0, world_);
    result.all_at_step_end = at_step_end;
    result.stop_reason = at_step_end ? stop_reason : std::string();
    result.next_round_step = at_step_end ? next_label_step : 0;
    return result;
  }
  // Frames (-1: failed, `stop` says why), walkers at the step end, the earliest next label step.
  long long summary[3] = {0, 0, 0};
  std::string stop;
  if (rank_ == 0) try {
    const int walkers = layout_.walkers;
    std::string text;
    if (label != nullptr)
      text = extxyz_frame_text(*label, "the label of walker " + std::to_string(layout_.walker));
    const std::vector<std::string> texts = all_gather_text(text, layout_.roots, walkers);
    const std::vector<std::string> stops =
        all_gather_text(at_step_end ? stop_reason : std::string(), layout_.roots, walkers);
    int at_end = at_step_end ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &at_end, 1, MPI_INT, MPI_SUM, layout_.roots);
    summary[1] = at_end;
    long long next = at_step_end ? next_label_step : 0;
    MPI_Allreduce(MPI_IN_PLACE, &next, 1, MPI_LONG_LONG, MPI_MIN, layout_.roots);
    summary[2] = next;
    for (int w = 0; w < walkers; ++w) {
      const std::string& frame_text = texts[static_cast<std::size_t>(w)];
      if (!frame_text.empty()) {
        ExtxyzContents parsed = parse_extxyz_text(frame_text);
        if (parsed.frames.size() != 1)
          throw std::runtime_error("walker " + std::to_string(w) + " sent a label that is not "
                                   "one whole frame");
        result.frames.push_back(std::move(parsed.frames.front()));
        result.frame_walkers.push_back(w);
      }
      const std::string& reason = stops[static_cast<std::size_t>(w)];
      if (stop.empty() && !reason.empty()) stop = "walker " + std::to_string(w) + ": " + reason;
    }
    summary[0] = static_cast<long long>(result.frames.size());
  } catch (const std::exception& e) {
    summary[0] = -1;
    stop = e.what();
  }
  MPI_Bcast(summary, 3, MPI_LONG_LONG, 0, world_);
  broadcast_bytes(stop, 0, world_);
  if (summary[0] < 0) throw std::runtime_error("sharing labels between walkers: " + stop);
  result.frame_count = summary[0];
  result.all_at_step_end = summary[1] == layout_.walkers;
  result.stop_reason = result.all_at_step_end ? stop : std::string();
  result.next_round_step = result.all_at_step_end ? summary[2] : 0;
  return result;
}

bool WalkerExchange::same_everywhere(uint64_t value) const {
  unsigned long long low = value, high = value;
  MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, world_);
  MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, world_);
  if (shared() && rank_ == 0) {
    MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, layout_.roots);
    MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, layout_.roots);
  }
  int same = low == high ? 1 : 0;
  MPI_Bcast(&same, 1, MPI_INT, 0, world_);
  return same == 1;
}

std::string WalkerExchange::from_first_walker(const std::string& text) const {
  std::string result = text;
  if (shared() && rank_ == 0) broadcast_bytes(result, 0, layout_.roots);
  broadcast_bytes(result, 0, world_);
  return result;
}

}  // namespace otf

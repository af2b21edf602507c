#include "journal_replay.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "rank_agreement.h"

namespace otf {
namespace {

// Where each frame of extxyz text starts (a count line, a comment line, one line per atom).
std::vector<std::size_t> frame_starts(const std::string& text) {
  std::vector<std::size_t> starts;
  std::size_t at = 0;
  while (at < text.size()) {
    starts.push_back(at);
    long long atoms = -1;
    try {
      atoms = std::stoll(text.substr(at, text.find('\n', at) - at));
    } catch (const std::exception&) {
    }
    if (atoms < 0)
      throw std::runtime_error("its text at byte " + std::to_string(at) +
                               " is not an extxyz frame (no atom count)");
    for (long long line = 0; line < atoms + 2 && at < text.size(); ++line) {
      const std::size_t end = text.find('\n', at);
      at = end == std::string::npos ? text.size() : end + 1;
    }
  }
  return starts;
}

// The journal's bytes from the start of the last frame before `offset` on, and where that frame
// starts in the file (offset itself when none precedes it). Throws when `offset` is not where a
// frame ends.
std::string journal_tail(const std::string& path, int64_t offset, int64_t& tail_start) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the label journal '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::size_t> starts;
  try {
    starts = frame_starts(text);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("the label journal '" + path + "': " + e.what());
  }
  tail_start = offset;
  bool boundary = offset == static_cast<int64_t>(text.size());
  for (std::size_t k = 0; k < starts.size(); ++k) {
    if (static_cast<int64_t>(starts[k]) != offset) continue;
    boundary = true;
    break;
  }
  if (!boundary)
    throw std::runtime_error(
        "the label journal '" + path + "' holds " + std::to_string(text.size()) +
        " bytes, and no frame of it ends where it ended when the restart file was written (byte " +
        std::to_string(offset) + "): it is not the journal of the run that wrote the restart file");
  for (const std::size_t start : starts)
    if (static_cast<int64_t>(start) < offset) tail_start = static_cast<int64_t>(start);
  return text.substr(static_cast<std::size_t>(tail_start));
}

}  // namespace

JournalReplay::JournalReplay(const std::string& path, int64_t offset, int64_t calls_at_restart,
                             MPI_Comm world)
    : world_(world) {
  int rank = 0;
  MPI_Comm_rank(world_, &rank);
  std::string text;
  long long tail_start = 0;
  agreed_or_throw(world_, "cannot resume from the label journal", [&] {
    int64_t start = offset;
    if (rank == 0) text = journal_tail(path, offset, start);
    tail_start = start;
  });
  broadcast_bytes(text, 0, world_);
  MPI_Bcast(&tail_start, 1, MPI_LONG_LONG, 0, world_);
  agreed_or_throw(world_, "cannot resume from the label journal", [&] {
    const std::vector<std::size_t> starts = frame_starts(text);
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const std::size_t end = k + 1 < starts.size() ? starts[k + 1] : text.size();
      ExtxyzContents contents = parse_extxyz_text(text.substr(starts[k], end - starts[k]));
      if (contents.frames.size() != 1) continue;  // a frame cut short (the writer drops it)
      Entry entry{std::move(contents.frames.front()), tail_start + static_cast<int64_t>(starts[k])};
      if (entry.offset < offset) {
        restart_frame_ = std::move(entry.frame);
        continue;
      }
      const int64_t expected = calls_at_restart + static_cast<int64_t>(frames_.size()) + 1;
      if (entry.frame.call != expected)
        throw std::runtime_error(
            "the label journal '" + path +
            "' does not continue the restart file: its frame of "
            "step " +
            std::to_string(entry.frame.step) + " is reference call " +
            std::to_string(entry.frame.call) + ", expected " + std::to_string(expected) +
            " (the restart file counts " + std::to_string(calls_at_restart) +
            " calls); name the journal of the run that wrote the restart file");
      frames_.push_back(std::move(entry));
    }
    end_offset_ = tail_start + static_cast<int64_t>(text.size());
  });
}

std::optional<ReferenceLabel> JournalReplay::label_if_same(
    const LabelledFrame& frame, const ReferenceConfiguration& configuration) const {
  std::unordered_map<int64_t, std::size_t> index;
  for (std::size_t a = 0; a < frame.ids.size(); ++a) index.emplace(frame.ids[a], a);
  ReferenceLabel label;
  label.energy = frame.energy;
  label.virial = frame.virial;
  label.owned_forces.reserve(3 * static_cast<std::size_t>(configuration.num_local));
  int differs = configuration.atoms_in_frame != frame.num_atoms() ? 1 : 0;
  for (int i = 0; i < configuration.num_local && !differs; ++i) {
    const auto found = index.find(configuration.ids[i]);
    if (found == index.end()) {
      differs = 1;
      break;
    }
    for (std::size_t d = 0; d < 3; ++d) {
      const double here = configuration.positions[3 * static_cast<std::size_t>(i) + d];
      if (!(std::abs(here - frame.positions[3 * found->second + d]) <= kPositionTolerance))
        differs = 1;
      label.owned_forces.push_back(frame.forces[3 * found->second + d]);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &differs, 1, MPI_INT, MPI_MAX, world_);
  if (differs) return std::nullopt;
  return label;
}

std::optional<ReferenceLabel> JournalReplay::take(const ReferenceConfiguration& configuration) {
  // The same frames on every rank: whether one is due is agreed without communication.
  if (frames_.empty() || frames_.front().frame.step != configuration.step) return std::nullopt;
  std::optional<ReferenceLabel> label = label_if_same(frames_.front().frame, configuration);
  if (!label) missed_.push_back(std::move(frames_.front().frame));
  frames_.pop_front();
  return label;
}

std::optional<ReferenceLabel> JournalReplay::take_repeated(
    const ReferenceConfiguration& configuration) {
  if (!restart_frame_ || restart_frame_->step != configuration.step) return std::nullopt;
  std::optional<ReferenceLabel> label = label_if_same(*restart_frame_, configuration);
  restart_frame_.reset();
  return label;
}

std::vector<LabelledFrame> JournalReplay::take_missed(int64_t step, bool every_one) {
  if (restart_frame_ && restart_frame_->step < step) restart_frame_.reset();
  while (!frames_.empty() && (every_one || frames_.front().frame.step < step)) {
    missed_.push_back(std::move(frames_.front().frame));
    frames_.pop_front();
  }
  return std::exchange(missed_, {});
}

}  // namespace otf

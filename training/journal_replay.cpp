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

// The journal's bytes from `offset` on; throws when the file is shorter.
std::string journal_tail(const std::string& path, int64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the label journal '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(text.size()) < offset)
    throw std::runtime_error(
        "the label journal '" + path + "' holds " + std::to_string(text.size()) +
        " bytes, the restart file was written when it held " + std::to_string(offset) +
        ": it is not the journal of the run that wrote the restart file");
  return text.substr(static_cast<std::size_t>(offset));
}

// Where each frame of extxyz text starts (a count line, a comment line, one line per atom).
std::vector<std::size_t> frame_starts(const std::string& text) {
  std::vector<std::size_t> starts;
  std::size_t at = 0;
  while (at < text.size()) {
    starts.push_back(at);
    const long long atoms = std::stoll(text.substr(at, text.find('\n', at) - at));
    for (long long line = 0; line < atoms + 2 && at < text.size(); ++line) {
      const std::size_t end = text.find('\n', at);
      at = end == std::string::npos ? text.size() : end + 1;
    }
  }
  return starts;
}

}  // namespace

JournalReplay::JournalReplay(const std::string& path, int64_t offset, int64_t calls_at_restart,
                             MPI_Comm world)
    : world_(world) {
  int rank = 0;
  MPI_Comm_rank(world_, &rank);
  std::string text;
  agreed_or_throw(world_, "cannot resume from the label journal", [&] {
    if (rank == 0) text = journal_tail(path, offset);
  });
  broadcast_bytes(text, 0, world_);
  agreed_or_throw(world_, "cannot resume from the label journal", [&] {
    const std::vector<std::size_t> starts = frame_starts(text);
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const std::size_t end = k + 1 < starts.size() ? starts[k + 1] : text.size();
      ExtxyzContents contents = parse_extxyz_text(text.substr(starts[k], end - starts[k]));
      if (contents.frames.size() != 1) continue;  // a frame cut short (the writer drops it)
      Entry entry{std::move(contents.frames.front()), offset + static_cast<int64_t>(starts[k])};
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
    end_offset_ = offset + static_cast<int64_t>(text.size());
  });
}

std::optional<ReferenceLabel> JournalReplay::take(const ReferenceConfiguration& configuration) {
  // The same frames on every rank: whether one is due is agreed without communication.
  if (frames_.empty() || frames_.front().frame.step != configuration.step) return std::nullopt;
  const LabelledFrame& frame = frames_.front().frame;
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
  if (differs) {
    missed_.push_back(std::move(frames_.front().frame));
    frames_.pop_front();
    return std::nullopt;
  }
  frames_.pop_front();
  return label;
}

std::vector<LabelledFrame> JournalReplay::take_missed(int64_t step, bool every_one) {
  while (!frames_.empty() && (every_one || frames_.front().frame.step < step)) {
    missed_.push_back(std::move(frames_.front().frame));
    frames_.pop_front();
  }
  return std::exchange(missed_, {});
}

}  // namespace otf

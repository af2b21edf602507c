#include "replay_buffer.h"

#include <torch/serialize.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "keywords.h"
#include "state_archive.h"

namespace otf {
namespace {

constexpr KeywordTable<EvictionPolicy, 2> kPolicyNames{{
    {"oldest", EvictionPolicy::Oldest},
    {"reservoir", EvictionPolicy::Reservoir},
}};

// The format is bumped when the layout changes; a newer state is refused with a message saying so.
const state_archive::StateKind kStateKind{"otf-torch replay buffer", 1, "replay buffer state",
                                          "not a replay buffer state"};

void require_option(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("replay buffer: " + message);
}


int64_t validation_capacity(const ReplayBufferOptions& options) {
  if (options.validation_fraction <= 0.0) return 0;
  return std::max<int64_t>(
      1, std::llround(static_cast<double>(options.capacity_frames) * options.validation_fraction));
}

int64_t frame_nbytes(const TrainingBatch& frame) {
  int64_t total = 0;
  for (const auto& entry : frame.tensors()) total += static_cast<int64_t>(entry.second.nbytes());
  return total;
}

// Load-time failures that are not option mismatches: the bytes are not (a whole) buffer state.
[[noreturn]] void damaged(const std::string& what) {
  throw std::runtime_error("replay buffer state is damaged: " + what);
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  return state_archive::read_int(archive, key, kStateKind.noun);
}

std::string read_string(torch::serialize::InputArchive& archive, const std::string& key) {
  return state_archive::read_string(archive, key, kStateKind.noun);
}

double read_double(torch::serialize::InputArchive& archive, const std::string& key) {
  return state_archive::read_double(archive, key, kStateKind.noun);
}

// A frame's tensor names go in as values, not as archive keys: LibTorch's archives refuse keys
// containing '.', and a model may use any name.
void write_frame(torch::serialize::OutputArchive& archive, const std::string& key,
                 const TrainingBatch& frame) {
  torch::serialize::OutputArchive frame_archive;
  frame_archive.write("tensor_count", c10::IValue(static_cast<int64_t>(frame.tensors().size())));
  int64_t index = 0;
  for (const auto& [name, tensor] : frame.tensors()) {
    frame_archive.write("name/" + std::to_string(index), c10::IValue(name));
    // As a buffer: a parameter would be refused for integer and bool tensors.
    frame_archive.write("tensor/" + std::to_string(index), tensor, /*is_buffer=*/true);
    ++index;
  }
  archive.write(key, frame_archive);
}

TrainingBatch read_frame(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::serialize::InputArchive frame_archive;
  if (!archive.try_read(key, frame_archive)) damaged("frame '" + key + "' is missing");
  const int64_t count = read_int(frame_archive, "tensor_count");
  if (count < 1) damaged("frame '" + key + "' has no tensors");
  std::map<std::string, torch::Tensor> tensors;
  for (int64_t i = 0; i < count; ++i) {
    const std::string name = read_string(frame_archive, "name/" + std::to_string(i));
    torch::Tensor tensor;
    if (!frame_archive.try_read("tensor/" + std::to_string(i), tensor, /*is_buffer=*/true))
      damaged("tensor '" + name + "' of frame '" + key + "' is missing");
    tensors.emplace(name, std::move(tensor));
  }
  return TrainingBatch(std::move(tensors));
}

}  // namespace

void check_replay_buffer_options(const ReplayBufferOptions& options) {
  require_option(options.capacity_frames >= 1,
                 "capacity_frames must be >= 1, got " + std::to_string(options.capacity_frames));
  require_option(options.capacity_bytes >= 0, "capacity_bytes must be >= 0 (0 = no limit), got " +
                                                  std::to_string(options.capacity_bytes));
  require_option(
      std::isfinite(options.validation_fraction) && options.validation_fraction >= 0.0 &&
          options.validation_fraction <= 0.5,
      "validation_fraction must be in [0, 0.5], got " + format_number(options.validation_fraction));
  require_option(
      options.eviction == EvictionPolicy::Oldest || options.eviction == EvictionPolicy::Reservoir,
      "invalid eviction policy value " + std::to_string(static_cast<int>(options.eviction)));
}

EvictionPolicy parse_eviction_policy(std::string_view text) {
  return parse_keyword(kPolicyNames, text, "eviction policy", "accepted: oldest, reservoir; any case");
}

std::string to_string(EvictionPolicy policy) {
  return keyword_spelling(kPolicyNames, policy, "EvictionPolicy");
}

std::ostream& operator<<(std::ostream& out, EvictionPolicy policy) {
  return out << to_string(policy);
}

std::string to_string(FrameDestination destination) {
  switch (destination) {
    case FrameDestination::Training:
      return "training";
    case FrameDestination::Validation:
      return "validation";
    case FrameDestination::Dropped:
      return "dropped";
  }
  throw std::invalid_argument("invalid FrameDestination value " +
                              std::to_string(static_cast<int>(destination)));
}

ReplayBuffer::ReplayBuffer(ReplayBufferOptions options)
    : options_(options), generator_(options.seed) {
  check_replay_buffer_options(options_);
  training_.name = "training";
  training_.capacity_frames = options_.capacity_frames;
  validation_.name = "validation";
  validation_.capacity_frames = validation_capacity(options_);
  // Shares in proportion to the frame capacities, in floating point: the product of two large
  // int64 capacities could overflow.
  const double training_part =
      static_cast<double>(training_.capacity_frames) /
      static_cast<double>(training_.capacity_frames + validation_.capacity_frames);
  training_.byte_share =
      static_cast<int64_t>(static_cast<double>(options_.capacity_bytes) * training_part);
  validation_.byte_share = options_.capacity_bytes - training_.byte_share;
}

FrameDestination ReplayBuffer::add(TrainingBatch frame) {
  if (frame.tensors().empty())
    throw std::invalid_argument("replay buffer: cannot add a frame without tensors");
  for (const auto& [name, tensor] : frame.tensors()) {
    if (!tensor.defined())
      throw std::invalid_argument("replay buffer: tensor '" + name +
                                  "' of the added frame is undefined");
  }
  const int64_t bytes_needed = frame_nbytes(frame);
  if (options_.capacity_bytes > 0 && bytes_needed > options_.capacity_bytes)
    throw std::invalid_argument(
        "replay buffer: a frame of " + std::to_string(bytes_needed) +
        " bytes is larger than capacity_bytes = " + std::to_string(options_.capacity_bytes) +
        " on its own; raise capacity_bytes (0 = no limit) or store smaller frames");

  std::map<std::string, torch::Tensor> owned;
  for (const auto& [name, tensor] : frame.tensors())
    owned.emplace(name, tensor.detach().clone(at::MemoryFormat::Contiguous));

  ++frames_seen_;
  bool to_validation = false;
  if (validation_.capacity_frames > 0) {
    // 53 random bits as a double in [0, 1): the same on every standard library.
    const double u = static_cast<double>(generator_() >> 11) * 0x1.0p-53;
    to_validation = u < options_.validation_fraction;
  }
  FrameSet& target = to_validation ? validation_ : training_;
  FrameSet& other = to_validation ? training_ : validation_;
  return add_to(target, other, TrainingBatch(std::move(owned)), bytes_needed);
}

FrameDestination ReplayBuffer::add_to(FrameSet& target, FrameSet& other, TrainingBatch frame,
                                      int64_t frame_bytes) {
  const FrameDestination stored =
      &target == &validation_ ? FrameDestination::Validation : FrameDestination::Training;
  ++target.frames_offered;
  const int64_t size = static_cast<int64_t>(target.frames.size());

  if (options_.eviction == EvictionPolicy::Oldest) {
    target.frames.push_back(std::move(frame));
    target.frame_bytes.push_back(frame_bytes);
    target.bytes += frame_bytes;
    while (static_cast<int64_t>(target.frames.size()) > target.capacity_frames) evict(target, 0);
    evict_until_within_bytes(target, other, static_cast<int64_t>(target.frames.size()) - 1);
    return stored;
  }

  // Reservoir. The set is still filling while it has room in frames and in bytes (its own share
  // counts as room: the other set then gives up memory). Once full, its current size is the
  // reservoir's capacity, so with equal-sized frames this is Algorithm R with
  // k = min(capacity_frames, frames that fit in the bytes).
  const bool room_in_bytes =
      options_.capacity_bytes == 0 || bytes() + frame_bytes <= options_.capacity_bytes ||
      target.bytes + frame_bytes <= target.byte_share || target.frames.empty();
  if (size < target.capacity_frames && room_in_bytes) {
    target.frames.push_back(std::move(frame));
    target.frame_bytes.push_back(frame_bytes);
    target.bytes += frame_bytes;
    evict_until_within_bytes(target, other, size);
    return stored;
  }
  const auto slot =
      static_cast<int64_t>(uniform_below(static_cast<uint64_t>(target.frames_offered)));
  if (slot >= size) return FrameDestination::Dropped;
  target.bytes += frame_bytes - target.frame_bytes[slot];
  target.frames[slot] = std::move(frame);
  target.frame_bytes[slot] = frame_bytes;
  evict_until_within_bytes(target, other, slot);
  return stored;
}

// The new frame (at `protected_index` in `target`) stays. add() has checked that it fits on its
// own, so while the total is over the cap, either target holds more than the new frame or the
// other set is not empty.
void ReplayBuffer::evict_until_within_bytes(FrameSet& target, FrameSet& other,
                                            int64_t protected_index) {
  if (options_.capacity_bytes == 0) return;
  while (bytes() > options_.capacity_bytes) {
    const bool target_has_others = target.frames.size() > 1;
    if (target_has_others && (target.bytes > target.byte_share || other.frames.empty())) {
      const int64_t victim = victim_index(target, protected_index);
      evict(target, victim);
      if (victim < protected_index) --protected_index;
    } else if (!other.frames.empty()) {
      evict(other, victim_index(other, -1));
    } else {
      throw std::logic_error("replay buffer: over capacity_bytes with nothing left to evict");
    }
  }
}

void ReplayBuffer::evict(FrameSet& set, int64_t index) {
  set.bytes -= set.frame_bytes[index];
  set.frames.erase(set.frames.begin() + index);
  set.frame_bytes.erase(set.frame_bytes.begin() + index);
}

// Oldest: the front (the new frame sits at the back). Reservoir: uniform over the stored frames
// but the protected one, which keeps the sample uniform.
int64_t ReplayBuffer::victim_index(const FrameSet& set, int64_t protected_index) {
  if (options_.eviction == EvictionPolicy::Oldest) return protected_index == 0 ? 1 : 0;
  const int64_t candidates =
      static_cast<int64_t>(set.frames.size()) - (protected_index >= 0 ? 1 : 0);
  auto victim = static_cast<int64_t>(uniform_below(static_cast<uint64_t>(candidates)));
  if (protected_index >= 0 && victim >= protected_index) ++victim;
  return victim;
}

// Rejection of the 2^64 mod bound lowest values, then modulo: unbiased (as in PCG's bounded_rand).
uint64_t ReplayBuffer::uniform_below(uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = generator_();
    if (r >= threshold) return r % bound;
  }
}

std::vector<TrainingBatch> ReplayBuffer::sample(int64_t batch_size) {
  if (batch_size < 1)
    throw std::invalid_argument("replay buffer: sample batch_size must be >= 1, got " +
                                std::to_string(batch_size));
  const int64_t size = training_size();
  const int64_t count = std::min(batch_size, size);
  // Partial Fisher-Yates shuffle: the first `count` positions are a draw without replacement.
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<TrainingBatch> drawn;
  drawn.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto j = i + static_cast<int64_t>(uniform_below(static_cast<uint64_t>(size - i)));
    std::swap(order[i], order[j]);
    drawn.push_back(training_.frames[order[i]]);
  }
  return drawn;
}

std::vector<TrainingBatch> ReplayBuffer::training_frames() const {
  return {training_.frames.begin(), training_.frames.end()};
}

std::vector<TrainingBatch> ReplayBuffer::validation_frames() const {
  return {validation_.frames.begin(), validation_.frames.end()};
}

std::string ReplayBuffer::save_state() const {
  torch::serialize::OutputArchive archive;
  state_archive::write_header(archive, kStateKind);
  archive.write("options/capacity_frames", c10::IValue(options_.capacity_frames));
  archive.write("options/capacity_bytes", c10::IValue(options_.capacity_bytes));
  archive.write("options/validation_fraction", c10::IValue(options_.validation_fraction));
  archive.write("options/eviction", c10::IValue(to_string(options_.eviction)));
  // As text: an IValue integer is signed.
  archive.write("options/seed", c10::IValue(std::to_string(options_.seed)));
  archive.write("frames_seen", c10::IValue(frames_seen_));
  std::ostringstream generator_text;
  generator_text << generator_;
  archive.write("generator", c10::IValue(generator_text.str()));
  for (const FrameSet* set : {&training_, &validation_}) {
    archive.write(set->name + "/frames_offered", c10::IValue(set->frames_offered));
    archive.write(set->name + "/count", c10::IValue(static_cast<int64_t>(set->frames.size())));
    for (size_t i = 0; i < set->frames.size(); ++i)
      write_frame(archive, set->name + "/" + std::to_string(i), set->frames[i]);
  }
  return state_archive::to_bytes(archive);
}

void ReplayBuffer::load_state(const std::string& bytes) {
  torch::serialize::InputArchive archive;
  state_archive::load_checked(archive, bytes, kStateKind);

  std::vector<std::string> differences;
  const auto compare = [&differences](const std::string& option, const std::string& saved,
                                      const std::string& mine) {
    if (saved != mine)
      differences.push_back(option + " was " + saved + " when saved, this buffer has " + mine);
  };
  compare("capacity_frames", std::to_string(read_int(archive, "options/capacity_frames")),
          std::to_string(options_.capacity_frames));
  compare("capacity_bytes", std::to_string(read_int(archive, "options/capacity_bytes")),
          std::to_string(options_.capacity_bytes));
  const double saved_fraction = read_double(archive, "options/validation_fraction");
  if (saved_fraction != options_.validation_fraction)
    compare("validation_fraction", format_number(saved_fraction),
            format_number(options_.validation_fraction));
  compare("eviction", read_string(archive, "options/eviction"), to_string(options_.eviction));
  compare("seed", read_string(archive, "options/seed"), std::to_string(options_.seed));
  if (!differences.empty()) {
    std::string message = "replay buffer state does not match this buffer's options: ";
    for (size_t i = 0; i < differences.size(); ++i)
      message += (i == 0 ? "" : "; ") + differences[i];
    throw std::runtime_error(message + " (build the buffer with the saved options to resume)");
  }

  // Everything is read into a fresh buffer first, so a failure leaves this one as it was.
  ReplayBuffer restored(options_);
  try {
    restored.frames_seen_ = read_int(archive, "frames_seen");
    std::istringstream generator_text(read_string(archive, "generator"));
    generator_text >> restored.generator_;
    if (generator_text.fail()) damaged("the random generator state cannot be read");
    int64_t frames_stored = 0;
    for (FrameSet* set : {&restored.training_, &restored.validation_}) {
      set->frames_offered = read_int(archive, set->name + "/frames_offered");
      const int64_t count = read_int(archive, set->name + "/count");
      if (count < 0 || count > set->capacity_frames || count > set->frames_offered)
        damaged(std::to_string(count) + " " + set->name + " frames for a capacity of " +
                std::to_string(set->capacity_frames));
      for (int64_t i = 0; i < count; ++i) {
        TrainingBatch frame = read_frame(archive, set->name + "/" + std::to_string(i));
        const int64_t frame_bytes = frame_nbytes(frame);
        set->frames.push_back(std::move(frame));
        set->frame_bytes.push_back(frame_bytes);
        set->bytes += frame_bytes;
      }
      frames_stored += count;
    }
    if (options_.capacity_bytes > 0 && restored.bytes() > options_.capacity_bytes)
      damaged("its frames hold " + std::to_string(restored.bytes()) +
              " bytes, more than capacity_bytes = " + std::to_string(options_.capacity_bytes));
    if (restored.training_.frames_offered + restored.validation_.frames_offered !=
            restored.frames_seen_ ||
        frames_stored > restored.frames_seen_)
      damaged("its frame counters disagree");
  } catch (const c10::Error& error) {
    damaged(error.what_without_backtrace());
  }
  *this = std::move(restored);
}

}  // namespace otf

// The bounded store of labelled frames that on-the-fly training draws its batches from: a training
// set and an optional held-out validation set, each capped in frames, both together capped in
// bytes, with FIFO or reservoir eviction, seeded and checkpointable so a resumed run is bitwise
// identical to an uninterrupted one.
#pragma once

#include <cstdint>
#include <deque>
#include <iosfwd>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "training_batch.h"

namespace otf {

// Which stored frame makes room for a new one once a set is full.
//   Oldest:    first in, first out: the set holds the most recent frames.
//   Reservoir: reservoir sampling (Vitter's Algorithm R): the n-th frame routed to a full set
//              replaces a uniformly chosen stored frame with probability size/n, so the set is a
//              uniform sample of every frame it was offered, old configurations included.
enum class EvictionPolicy { Oldest, Reservoir };

// Accepts "oldest" and "reservoir" in any letter case with surrounding whitespace; throws
// std::invalid_argument naming the bad value and listing the accepted ones.
EvictionPolicy parse_eviction_policy(std::string_view text);
std::string to_string(EvictionPolicy policy);
std::ostream& operator<<(std::ostream& out, EvictionPolicy policy);

struct ReplayBufferOptions {
  int64_t capacity_frames = 1000;  // training set, >= 1
  // Training and validation sets together, counted as the sum of Tensor::nbytes() over every
  // tensor of every stored frame (the buffer stores compact copies, so this is their memory).
  // 0: no limit.
  int64_t capacity_bytes = 0;
  // Probability, in [0, 0.5], that an added frame is held out for validation. The validation set
  // holds at most max(1, round(capacity_frames * validation_fraction)) frames (none when 0).
  double validation_fraction = 0.0;
  EvictionPolicy eviction = EvictionPolicy::Oldest;  // applies to both sets
  uint64_t seed = 0;
};

// Throws std::invalid_argument naming the bad option and its accepted range (the buffer's own
// rules; its constructor applies them).
void check_replay_buffer_options(const ReplayBufferOptions& options);

// Where add() put a frame.
enum class FrameDestination { Training, Validation, Dropped };
std::string to_string(FrameDestination destination);  // "training", "validation", "dropped"

class ReplayBuffer {
 public:
  // Throws std::invalid_argument naming the bad option and its accepted range.
  explicit ReplayBuffer(ReplayBufferOptions options);

  // Stores a detached, contiguous copy of `frame` (so views of larger tensors or of borrowed
  // memory are neither kept alive nor counted wrongly). Routing to validation draws from the
  // buffer's generator. Under Oldest every frame is stored; under Reservoir a frame offered to a
  // full set may be dropped. When the byte cap binds, the set that holds more than its share of
  // capacity_bytes (shares proportional to the two sets' frame capacities) gives up frames first,
  // so neither set can starve the other.
  // Throws std::invalid_argument, leaving the buffer unchanged, when the frame has no tensors, an
  // undefined tensor, or is larger than capacity_bytes on its own.
  FrameDestination add(TrainingBatch frame);

  // `batch_size` distinct training frames (all of them, in random order, when fewer are stored),
  // drawn with the buffer's generator. Never returns validation frames. The tensors are shared
  // with the buffer: treat them as read-only. Throws std::invalid_argument if batch_size < 1.
  std::vector<TrainingBatch> sample(int64_t batch_size);

  // Stored frames (shared tensors, read-only), oldest first under Oldest.
  std::vector<TrainingBatch> training_frames() const;
  std::vector<TrainingBatch> validation_frames() const;

  int64_t training_size() const { return static_cast<int64_t>(training_.frames.size()); }
  int64_t validation_size() const { return static_cast<int64_t>(validation_.frames.size()); }
  int64_t validation_capacity_frames() const { return validation_.capacity_frames; }
  // Every frame add() accepted, stored or dropped (rejected frames are not counted).
  int64_t frames_seen() const { return frames_seen_; }
  int64_t bytes() const { return training_.bytes + validation_.bytes; }
  const ReplayBufferOptions& options() const { return options_; }

  // The whole state (options, counters, generator, every stored tensor) as bytes. After
  // load_state into a buffer built with the same options, every later add and sample gives
  // results bitwise identical to those of the buffer that was saved. load_state throws
  // std::runtime_error, leaving the buffer unchanged, for damaged or foreign bytes and for
  // options that differ (naming each option, the saved value and this buffer's).
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  struct FrameSet {
    std::string name;  // "training" or "validation", for messages and archive keys
    int64_t capacity_frames = 0;
    int64_t byte_share = 0;  // its part of capacity_bytes when both sets compete for memory
    std::deque<TrainingBatch> frames;
    std::deque<int64_t> frame_bytes;  // parallel to frames
    int64_t bytes = 0;
    int64_t frames_offered = 0;  // the n of reservoir sampling
  };

  FrameDestination add_to(FrameSet& target, FrameSet& other, TrainingBatch frame,
                          int64_t frame_bytes);
  void evict_until_within_bytes(FrameSet& target, FrameSet& other, int64_t protected_index);
  void evict(FrameSet& set, int64_t index);
  int64_t victim_index(const FrameSet& set, int64_t protected_index);
  // Unbiased, and the same on every standard library (std::uniform_int_distribution is not).
  uint64_t uniform_below(uint64_t bound);

  ReplayBufferOptions options_;
  FrameSet training_;
  FrameSet validation_;
  int64_t frames_seen_ = 0;
  std::mt19937_64 generator_;
};

}  // namespace otf

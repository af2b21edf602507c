// The replay buffer never holds more frames or bytes than its caps, evicts the oldest frame (FIFO)
// or keeps a uniform sample (reservoir), holds out about validation_fraction of the frames and
// never trains on them, samples without replacement, and survives save/load bitwise: a restored
// buffer continues exactly as the saved one would have. Bad options, oversize frames, foreign
// states and mismatched options are refused with a message naming the problem.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "expect_error.h"
#include "replay_buffer.h"

namespace {

using namespace otf;
using otf::testing::expect_error;

// A labelled frame of `atoms` atoms whose values are a deterministic function of `index` (no
// global random generator), tagged with "index" so tests can tell frames apart.
TrainingBatch make_frame(int64_t index, int64_t atoms = 4) {
  const auto options64 = torch::TensorOptions().dtype(torch::kFloat64);
  const auto base = torch::arange(atoms * 3, options64).reshape({atoms, 3});
  const double phase = static_cast<double>(index) * 0.7310585786300049;
  return TrainingBatch({
      {"positions", torch::sin(base + phase) * 3.0},
      {"species", torch::arange(atoms, torch::kInt64) % 3},
      {"energy", torch::tensor({static_cast<float>(std::cos(phase))}, torch::kFloat32)},
      {"forces", torch::cos(base * 1.3 - phase).to(torch::kFloat32)},
      {"force_mask", torch::arange(atoms, torch::kInt64).remainder(2) == 0},
      {"index", torch::tensor({index}, torch::kInt64)},
  });
}

// Only the tag: for the statistical tests, which add tens of thousands of frames.
TrainingBatch tag_frame(int64_t index) {
  return TrainingBatch({{"index", torch::tensor({index}, torch::kInt64)}});
}

int64_t index_of(const TrainingBatch& frame) { return frame.at("index").item<int64_t>(); }

std::vector<int64_t> indices_of(const std::vector<TrainingBatch>& frames) {
  std::vector<int64_t> indices;
  for (const auto& frame : frames) indices.push_back(index_of(frame));
  return indices;
}

int64_t nbytes_of(const TrainingBatch& frame) {
  int64_t total = 0;
  for (const auto& entry : frame.tensors()) total += static_cast<int64_t>(entry.second.nbytes());
  return total;
}

int64_t nbytes_of(const std::vector<TrainingBatch>& frames) {
  int64_t total = 0;
  for (const auto& frame : frames) total += nbytes_of(frame);
  return total;
}

double mean(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// Same names, dtypes, shapes and bits.
void expect_identical(const std::vector<TrainingBatch>& a, const std::vector<TrainingBatch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].tensors().size(), b[i].tensors().size()) << "frame " << i;
    for (const auto& [name, tensor] : a[i].tensors()) {
      ASSERT_TRUE(b[i].contains(name)) << "frame " << i << " lacks " << name;
      const auto& other = b[i].at(name);
      EXPECT_EQ(tensor.scalar_type(), other.scalar_type()) << name;
      EXPECT_EQ(tensor.sizes(), other.sizes()) << name;
      EXPECT_TRUE(torch::equal(tensor, other)) << "frame " << i << " tensor " << name;
    }
  }
}

ReplayBufferOptions options_with(int64_t capacity_frames, int64_t capacity_bytes = 0,
                                 double validation_fraction = 0.0,
                                 EvictionPolicy eviction = EvictionPolicy::Oldest,
                                 uint64_t seed = 7) {
  ReplayBufferOptions options;
  options.capacity_frames = capacity_frames;
  options.capacity_bytes = capacity_bytes;
  options.validation_fraction = validation_fraction;
  options.eviction = eviction;
  options.seed = seed;
  return options;
}

TEST(ReplayBuffer, InvalidOptionsAreRefusedWithTheAcceptedRange) {
  expect_error<std::invalid_argument>([] { ReplayBuffer buffer(options_with(0)); },
                                      {"capacity_frames", ">= 1", "got 0"});
  expect_error<std::invalid_argument>([] { ReplayBuffer buffer(options_with(10, -5)); },
                                      {"capacity_bytes", ">= 0", "0 = no limit", "-5"});
  expect_error<std::invalid_argument>([] { ReplayBuffer buffer(options_with(10, 0, 0.6)); },
                                      {"validation_fraction", "[0, 0.5]", "0.6"});
  expect_error<std::invalid_argument>([] { ReplayBuffer buffer(options_with(10, 0, -0.1)); },
                                      {"validation_fraction", "-0.1"});
  expect_error<std::invalid_argument>(
      [] { ReplayBuffer buffer(options_with(10, 0, std::nan(""))); },
      {"validation_fraction", "nan"});
  expect_error<std::invalid_argument>(
      [] { ReplayBuffer buffer(options_with(10, 0, 0.0, static_cast<EvictionPolicy>(9))); },
      {"eviction policy", "9"});
}

TEST(ReplayBuffer, EvictionPolicyNamesParseAndPrint) {
  EXPECT_EQ(parse_eviction_policy(" Reservoir "), EvictionPolicy::Reservoir);
  EXPECT_EQ(parse_eviction_policy("OLDEST"), EvictionPolicy::Oldest);
  EXPECT_EQ(to_string(EvictionPolicy::Reservoir), "reservoir");
  EXPECT_EQ(to_string(FrameDestination::Dropped), "dropped");
  expect_error<std::invalid_argument>([] { parse_eviction_policy("lifo"); },
                                      {"'lifo'", "oldest", "reservoir"});
}

TEST(ReplayBuffer, ValidationCapacityFollowsTheFraction) {
  EXPECT_EQ(ReplayBuffer(options_with(10, 0, 0.25)).validation_capacity_frames(), 3);  // 2.5 up
  EXPECT_EQ(ReplayBuffer(options_with(1, 0, 0.1)).validation_capacity_frames(), 1);    // at least 1
  EXPECT_EQ(ReplayBuffer(options_with(100, 0, 0.0)).validation_capacity_frames(), 0);
}

TEST(ReplayBuffer, OldestKeepsTheMostRecentFramesWithinTheFrameCap) {
  ReplayBuffer buffer(options_with(5));
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(buffer.add(make_frame(i)), FrameDestination::Training);
    EXPECT_LE(buffer.training_size(), 5);
  }
  EXPECT_EQ(indices_of(buffer.training_frames()), (std::vector<int64_t>{7, 8, 9, 10, 11}));
  EXPECT_EQ(buffer.frames_seen(), 12);
  EXPECT_EQ(buffer.validation_size(), 0);
  EXPECT_EQ(buffer.bytes(), nbytes_of(buffer.training_frames()));
}

TEST(ReplayBuffer, OldestNeverExceedsTheByteCapAndEvictsTheOldest) {
  const int64_t cap = 3 * nbytes_of(make_frame(0, 6)) + 17;
  ReplayBuffer buffer(options_with(100, cap));
  for (int64_t i = 0; i < 40; ++i) {
    buffer.add(make_frame(i, 1 + (i * 7) % 9));  // 1..9 atoms
    ASSERT_LE(buffer.bytes(), cap);
    ASSERT_EQ(buffer.bytes(), nbytes_of(buffer.training_frames()));
    // What is left is the most recent frames, in order, the new one included.
    const auto kept = indices_of(buffer.training_frames());
    ASSERT_FALSE(kept.empty());
    EXPECT_EQ(kept.back(), i);
    for (size_t k = 1; k < kept.size(); ++k) EXPECT_EQ(kept[k], kept[k - 1] + 1);
    // ...and as many of them as fit: the next older one would not have.
    if (kept.front() > 0) {
      EXPECT_GT(buffer.bytes() +
                    nbytes_of(make_frame(kept.front() - 1, 1 + ((kept.front() - 1) * 7) % 9)),
                cap);
    }
  }
}

TEST(ReplayBuffer, TheBufferStoresCompactCopies) {
  ReplayBuffer buffer(options_with(4));
  auto big = torch::zeros({1000, 3}, torch::kFloat64);
  TrainingBatch frame({{"positions", big.slice(0, 0, 2)}});  // a view of 16 of 3000 elements
  buffer.add(frame);
  EXPECT_EQ(buffer.bytes(), 2 * 3 * 8);
  big.fill_(5.0);  // the caller reuses its array
  EXPECT_EQ(buffer.training_frames()[0].at("positions").sum().item<double>(), 0.0);
}

TEST(ReplayBuffer, AFrameLargerThanTheByteCapIsRejectedAndChangesNothing) {
  const auto frame = make_frame(0);
  const int64_t size = nbytes_of(frame);
  ReplayBuffer buffer(options_with(10, size - 1, 0.2));
  ReplayBuffer twin(options_with(10, size - 1, 0.2));
  expect_error<std::invalid_argument>(
      [&] { buffer.add(frame); },
      {std::to_string(size) + " bytes", "capacity_bytes = " + std::to_string(size - 1)});
  EXPECT_EQ(buffer.frames_seen(), 0);
  EXPECT_EQ(buffer.bytes(), 0);
  // The generator did not move either: both buffers route the next frames alike.
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(buffer.add(tag_frame(i)), twin.add(tag_frame(i)));

  expect_error<std::invalid_argument>([&] { buffer.add(TrainingBatch()); }, {"without tensors"});
  expect_error<std::invalid_argument>(
      [&] {
        buffer.add(TrainingBatch({{"forces", torch::Tensor()}}));
      },
      {"'forces'", "undefined"});
}

TEST(ReplayBuffer, ReservoirKeepsAUniformSampleOfEverythingSeen) {
  constexpr int64_t kCapacity = 200;
  constexpr int64_t kFrames = 20000;
  ReplayBuffer buffer(options_with(kCapacity, 0, 0.0, EvictionPolicy::Reservoir, 2024));
  int64_t dropped = 0;
  for (int64_t i = 0; i < kFrames; ++i) {
    if (buffer.add(tag_frame(i)) == FrameDestination::Dropped) ++dropped;
    ASSERT_LE(buffer.training_size(), kCapacity);
  }
  EXPECT_EQ(buffer.frames_seen(), kFrames);
  EXPECT_EQ(buffer.training_size(), kCapacity);
  EXPECT_GT(dropped, kFrames / 2);  // a full reservoir admits the n-th frame with 200/n
  const auto kept = indices_of(buffer.training_frames());
  // A uniform sample of 200 of 0..19999 has mean 9999.5 with standard deviation ~408; FIFO would
  // give ~19900.
  EXPECT_NEAR(mean(kept), 9999.5, 4 * 408.0);
  // Each quarter of the stream holds ~50 frames (binomial standard deviation ~6).
  std::vector<int64_t> per_quarter(4, 0);
  for (const auto index : kept) ++per_quarter[index * 4 / kFrames];
  for (const auto count : per_quarter) EXPECT_NEAR(count, 50, 25);
  EXPECT_EQ(std::set<int64_t>(kept.begin(), kept.end()).size(), kept.size());
}

TEST(ReplayBuffer, ReservoirUnderAByteCapIsUniformOverWhatFits) {
  const int64_t frame_bytes = nbytes_of(tag_frame(0));
  const int64_t cap = 50 * frame_bytes + 3;  // binds long before 1000 frames
  ReplayBuffer buffer(options_with(1000, cap, 0.0, EvictionPolicy::Reservoir, 5));
  for (int64_t i = 0; i < 10000; ++i) {
    buffer.add(tag_frame(i));
    ASSERT_LE(buffer.bytes(), cap);
  }
  EXPECT_EQ(buffer.training_size(), 50);
  // Uniform sample of 50 of 0..9999: mean 4999.5, standard deviation ~408.
  EXPECT_NEAR(mean(indices_of(buffer.training_frames())), 4999.5, 4 * 408.0);
}

TEST(ReplayBuffer, AboutValidationFractionOfTheFramesIsHeldOut) {
  ReplayBuffer buffer(options_with(10000, 0, 0.2, EvictionPolicy::Oldest, 99));
  int64_t to_validation = 0;
  for (int64_t i = 0; i < 5000; ++i) {
    const auto destination = buffer.add(tag_frame(i));
    EXPECT_NE(destination, FrameDestination::Dropped);
    if (destination == FrameDestination::Validation) ++to_validation;
  }
  EXPECT_EQ(buffer.validation_size(), to_validation);
  EXPECT_EQ(buffer.training_size() + buffer.validation_size(), 5000);
  EXPECT_NEAR(static_cast<double>(to_validation), 1000.0, 4 * std::sqrt(5000 * 0.2 * 0.8));

  ReplayBuffer without(options_with(100));
  for (int64_t i = 0; i < 200; ++i)
    EXPECT_EQ(without.add(tag_frame(i)), FrameDestination::Training);
}

TEST(ReplayBuffer, ValidationFramesAreNeverSampledForTraining) {
  ReplayBuffer buffer(options_with(50, 0, 0.3, EvictionPolicy::Oldest, 3));
  for (int64_t i = 0; i < 200; ++i) buffer.add(tag_frame(i));
  EXPECT_EQ(buffer.validation_size(), 15);
  EXPECT_EQ(buffer.training_size(), 50);
  const auto validation = indices_of(buffer.validation_frames());
  const auto training = indices_of(buffer.training_frames());
  const std::set<int64_t> held_out(validation.begin(), validation.end());
  const std::set<int64_t> trainable(training.begin(), training.end());
  std::set<int64_t> ever_sampled;
  for (int round = 0; round < 300; ++round) {
    for (const auto index : indices_of(buffer.sample(10))) {
      EXPECT_EQ(held_out.count(index), 0u) << "validation frame " << index << " sampled";
      EXPECT_EQ(trainable.count(index), 1u);
      ever_sampled.insert(index);
    }
  }
  EXPECT_EQ(ever_sampled, trainable);  // and every training frame is reachable
}

TEST(ReplayBuffer, SampleDrawsWithoutReplacement) {
  ReplayBuffer buffer(options_with(30));
  EXPECT_TRUE(buffer.sample(5).empty());
  for (int64_t i = 0; i < 20; ++i) buffer.add(tag_frame(i));
  for (int round = 0; round < 50; ++round) {
    const auto drawn = indices_of(buffer.sample(8));
    ASSERT_EQ(drawn.size(), 8u);
    EXPECT_EQ(std::set<int64_t>(drawn.begin(), drawn.end()).size(), 8u);
  }
  const auto all = indices_of(buffer.sample(100));  // more than stored: every frame once
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 20u);
  expect_error<std::invalid_argument>([&] { buffer.sample(0); }, {"batch_size", ">= 1", "got 0"});
}

TEST(ReplayBuffer, BothSetsShareTheByteCapWithoutStarvingEachOther) {
  for (const auto policy : {EvictionPolicy::Oldest, EvictionPolicy::Reservoir}) {
    SCOPED_TRACE(to_string(policy));
    const int64_t cap = 8 * nbytes_of(make_frame(0, 5));
    ReplayBuffer buffer(options_with(10, cap, 0.5, policy, 11));  // validation holds up to 5
    for (int64_t i = 0; i < 300; ++i) {
      buffer.add(make_frame(i, 1 + i % 9));
      ASSERT_LE(buffer.bytes(), cap);
      ASSERT_LE(buffer.training_size(), 10);
      ASSERT_LE(buffer.validation_size(), 5);
      ASSERT_EQ(buffer.bytes(),
                nbytes_of(buffer.training_frames()) + nbytes_of(buffer.validation_frames()));
    }
    EXPECT_GE(buffer.training_size(), 2);
    EXPECT_GE(buffer.validation_size(), 1);
  }
}

// Frames of varied sizes, under a byte cap, with validation and reservoir eviction: every random
// draw the buffer makes is exercised.
ReplayBufferOptions resumable_options() {
  return options_with(20, 15 * nbytes_of(make_frame(0, 5)), 0.25, EvictionPolicy::Reservoir, 42);
}

TEST(ReplayBuffer, SaveAndLoadRestoreTheStateBitwiseAndContinueIdentically) {
  ReplayBuffer saved(resumable_options());
  for (int64_t i = 0; i < 100; ++i) saved.add(make_frame(i, 1 + (i * 5) % 9));
  saved.sample(4);
  const std::string state = saved.save_state();

  ReplayBuffer restored(resumable_options());
  restored.add(make_frame(1000));  // whatever was there is replaced
  restored.load_state(state);
  expect_identical(restored.training_frames(), saved.training_frames());
  expect_identical(restored.validation_frames(), saved.validation_frames());
  EXPECT_EQ(restored.frames_seen(), saved.frames_seen());
  EXPECT_EQ(restored.bytes(), saved.bytes());
  EXPECT_EQ(restored.save_state(), state);

  for (int64_t i = 100; i < 200; ++i) {
    const auto frame = make_frame(i, 1 + (i * 5) % 9);
    ASSERT_EQ(restored.add(frame), saved.add(frame)) << "frame " << i;
    expect_identical(restored.sample(1 + i % 7), saved.sample(1 + i % 7));
  }
  expect_identical(restored.training_frames(), saved.training_frames());
  expect_identical(restored.validation_frames(), saved.validation_frames());
  EXPECT_EQ(restored.save_state(), saved.save_state());
}

TEST(ReplayBuffer, AnyTensorNameSurvivesSaveAndLoad) {
  ReplayBuffer saved(options_with(3));
  saved.add(TrainingBatch({{"per.atom/energy", torch::arange(4, torch::kFloat64)},
                           {"", torch::ones({2}, torch::kBFloat16)}}));
  ReplayBuffer restored(options_with(3));
  restored.load_state(saved.save_state());
  expect_identical(restored.training_frames(), saved.training_frames());
}

TEST(ReplayBuffer, LoadingIntoABufferWithOtherOptionsNamesEveryDifference) {
  ReplayBuffer saved(resumable_options());
  for (int64_t i = 0; i < 10; ++i) saved.add(make_frame(i));
  const std::string state = saved.save_state();

  auto other = resumable_options();
  other.capacity_frames = 30;
  other.eviction = EvictionPolicy::Oldest;
  other.seed = 43;
  ReplayBuffer buffer(other);
  buffer.add(make_frame(500));
  expect_error<std::runtime_error>(
      [&] { buffer.load_state(state); },
      {"capacity_frames was 20 when saved, this buffer has 30",
       "eviction was reservoir when saved, this buffer has oldest",
       "seed was 42 when saved, this buffer has 43", "build the buffer with the saved options"});
  EXPECT_EQ(buffer.frames_seen(), 1);  // unchanged
  EXPECT_EQ(buffer.training_size() + buffer.validation_size(), 1);

  auto fraction = resumable_options();
  fraction.validation_fraction = 0.1;
  ReplayBuffer differs_in_fraction(fraction);
  expect_error<std::runtime_error>([&] { differs_in_fraction.load_state(state); },
                                   {"validation_fraction was 0.25 when saved", "has 0.1"});
  auto bytes = resumable_options();
  bytes.capacity_bytes = 0;
  ReplayBuffer differs_in_bytes(bytes);
  expect_error<std::runtime_error>([&] { differs_in_bytes.load_state(state); },
                                   {"capacity_bytes was", "this buffer has 0"});
}

TEST(ReplayBuffer, ForeignOrDamagedStatesAreRefused) {
  ReplayBuffer buffer(resumable_options());
  expect_error<std::runtime_error>([&] { buffer.load_state("not an archive"); },
                                   {"not a replay buffer state"});
  ReplayBuffer saved(resumable_options());
  for (int64_t i = 0; i < 10; ++i) saved.add(make_frame(i));
  const std::string state = saved.save_state();
  expect_error<std::runtime_error>([&] { buffer.load_state(state.substr(0, state.size() / 2)); },
                                   {"not a replay buffer state"});
  // A torch archive of another kind.
  torch::serialize::OutputArchive foreign;
  foreign.write("kind", c10::IValue(std::string("otf-torch training state")));
  std::ostringstream foreign_bytes;
  foreign.save_to(foreign_bytes);
  expect_error<std::runtime_error>([&] { buffer.load_state(foreign_bytes.str()); },
                                   {"not a replay buffer state"});
  EXPECT_EQ(buffer.frames_seen(), 0);
}

}  // namespace

// fix otf/train's one restart format: the trainer archive round trip, the refusal of the formats
// of OTF-Torch 0.1 and of newer ones, damaged data named as such, and the training session's own
// state (weights stored once) restoring a session exactly.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <torch/serialize.h>

#include "restart_archive.h"
#include "training_test_support.h"

namespace otf::testing {
namespace {

void expect_refused(const std::string& blob, const std::string& fragment) {
  try {
    decode_restart(blob.data(), blob.size());
    FAIL() << "accepted data that should be refused with: " << fragment;
  } catch (const RestartFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TrainerRestart sample_restart() {
  TrainerRestart restart;
  restart.policy.reference_drives = true;
  restart.policy.last_labelled_step = 120;
  restart.policy.last_checked_step = 110;
  restart.policy.last_counted_step = 125;
  restart.policy.model_driven_steps = 77;
  restart.policy.model_phase_labels = 3;
  restart.policy.first_counted_step = 5;
  restart.policy.inherited_history = 1440;
  restart.policy.watch_until = 37;
  restart.counters.reference_calls = 48;
  restart.counters.last_saved_step = 100;
  restart.counters.max_uncertainty = 0.123456789;
  restart.counters.replicas_differ = true;
  restart.counters.skipped_labels = 3;
  restart.counters.learned_labels = 41;
  restart.counters.largest_learned_force = 7.25;
  restart.counters.refused_labels_in_row = 2;
  restart.counters.lowest_learned_energy_per_atom = -4.5;
  restart.counters.highest_learned_energy_per_atom = -4.25;
  restart.calibration_labels = std::string("\x07\0\0\0\0\0\0\0", 8);
  restart.session = std::string("\0binary\xff session", 16);
  restart.rank_buffers = {std::string("rank 0 \0 part", 13), std::string()};
  return restart;
}

// A blob in the layout of OTF-Torch 0.1: tag, format, payload length, payload.
std::string old_blob(uint32_t format) {
  std::string blob("OTFTRAIN", 8);
  const uint64_t length = 4;
  blob.append(reinterpret_cast<const char*>(&format), sizeof(format));
  blob.append(reinterpret_cast<const char*>(&length), sizeof(length));
  blob.append("abcd");
  return blob;
}

TEST(RestartArchive, RoundTripKeepsEveryField) {
  const TrainerRestart restart = sample_restart();
  const std::string blob = encode_restart(restart);
  EXPECT_EQ(restart_blob_size(blob.data()), blob.size());
  const TrainerRestart back = decode_restart(blob.data(), blob.size());
  EXPECT_EQ(back.policy.reference_drives, true);
  EXPECT_EQ(back.policy.last_labelled_step, 120);
  EXPECT_EQ(back.policy.last_checked_step, 110);
  EXPECT_EQ(back.policy.last_counted_step, 125);
  EXPECT_EQ(back.policy.model_driven_steps, 77);
  EXPECT_EQ(back.policy.model_phase_labels, 3);
  EXPECT_EQ(back.policy.first_counted_step, 5);
  EXPECT_EQ(back.policy.inherited_history, 1440);
  EXPECT_EQ(back.policy.watch_until, 37);
  EXPECT_EQ(back.counters.reference_calls, 48);
  EXPECT_EQ(back.counters.last_saved_step, 100);
  EXPECT_EQ(back.counters.max_uncertainty, 0.123456789);
  EXPECT_TRUE(back.counters.replicas_differ);
  EXPECT_EQ(back.counters.skipped_labels, 3);
  EXPECT_EQ(back.counters.learned_labels, 41);
  EXPECT_EQ(back.counters.largest_learned_force, 7.25);
  EXPECT_EQ(back.counters.refused_labels_in_row, 2);
  EXPECT_EQ(back.calibration_labels, std::string("\x07\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(back.counters.lowest_learned_energy_per_atom, -4.5);
  EXPECT_EQ(back.counters.highest_learned_energy_per_atom, -4.25);
  EXPECT_EQ(back.session, restart.session);
  EXPECT_EQ(back.rank_buffers, restart.rank_buffers);
}

// A format-3 blob as the first writers of format 3 wrote it, before the reference times, the
// calibration and the outlier guard's counters were added: plain LibTorch archive fields.
std::string first_format3_blob() {
  torch::serialize::OutputArchive archive;
  const auto write_int = [&](const std::string& key, int64_t value) {
    archive.write(key, c10::IValue(value));
  };
  const auto write_bytes = [&](const std::string& key, const std::string& bytes) {
    torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
    if (!bytes.empty()) std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
    archive.write(key, tensor);
  };
  write_int("policy/reference_drives", 0);
  write_int("policy/last_labelled_step", 40);
  write_int("policy/last_checked_step", 41);
  write_int("policy/last_counted_step", 42);
  write_int("policy/model_driven_steps", 12);
  write_int("policy/model_phase_labels", 1);
  write_int("trainer/reference_calls", 9);
  write_int("trainer/last_saved_step", 30);
  archive.write("trainer/max_uncertainty", c10::IValue(0.5));
  write_int("trainer/replicas_differ", 0);
  write_bytes("session", std::string("session \0 bytes", 15));
  write_int("ranks", 1);
  write_bytes("buffer/0", "rank 0");
  std::ostringstream payload;
  archive.save_to(payload);
  std::string blob("OTFTRAIN", 8);
  const uint32_t format = 3;
  const uint64_t length = payload.str().size();
  blob.append(reinterpret_cast<const char*>(&format), sizeof(format));
  blob.append(reinterpret_cast<const char*>(&length), sizeof(length));
  return blob + payload.str();
}

TEST(RestartArchive, FilesWrittenBeforeLaterFieldsStillRead) {
  const std::string blob = first_format3_blob();
  const TrainerRestart back = decode_restart(blob.data(), blob.size());
  EXPECT_FALSE(back.policy.reference_drives);
  EXPECT_EQ(back.policy.last_labelled_step, 40);
  EXPECT_EQ(back.policy.model_phase_labels, 1);
  EXPECT_EQ(back.policy.first_counted_step, -1);  // set again at the continued run's first step
  EXPECT_EQ(back.policy.inherited_history, 0);
  EXPECT_EQ(back.policy.watch_until, -1);
  EXPECT_EQ(back.counters.reference_calls, 9);
  EXPECT_EQ(back.counters.max_uncertainty, 0.5);
  EXPECT_EQ(back.session, std::string("session \0 bytes", 15));
  EXPECT_EQ(back.rank_buffers, std::vector<std::string>{"rank 0"});
  // The later fields keep their defaults.
  const TrainerCounters defaults;
  EXPECT_EQ(back.counters.skipped_labels, 0);
  EXPECT_EQ(back.counters.reference_seconds, 0.0);
  EXPECT_EQ(back.counters.label_force_error, defaults.label_force_error);
  EXPECT_EQ(back.counters.label_atoms_above_bound, defaults.label_atoms_above_bound);
  EXPECT_EQ(back.counters.learned_labels, 0);
  EXPECT_EQ(back.counters.refused_labels_in_row, 0);
  // No learned energies: the energy guard's range is empty.
  EXPECT_GT(back.counters.lowest_learned_energy_per_atom,
            back.counters.highest_learned_energy_per_atom);
  EXPECT_TRUE(back.calibration.empty());
  EXPECT_TRUE(back.calibration_labels.empty());
}

TEST(RestartArchive, FormatsOfOtfTorch01AreRefusedWithWhatToDo) {
  for (const uint32_t format : {1u, 2u}) {
    const std::string blob = old_blob(format);
    EXPECT_EQ(restart_blob_size(blob.data()), blob.size());
    expect_refused(blob, "has format " + std::to_string(format));
    expect_refused(blob, "written by OTF-Torch 0.1");
    expect_refused(blob, "pair_style otf <saved model>");
  }
}

TEST(RestartArchive, NewerFormatsAskForAnUpdate) {
  expect_refused(old_blob(kRestartFormat + 1), "update OTF-Torch");
}

TEST(RestartArchive, DamagedDataIsNamed) {
  expect_refused(std::string("NOTOURS!....................", 28), "not an otf/train training state");
  EXPECT_THROW(restart_blob_size("NOTOURS!........"), RestartFormatError);
  std::string blob = encode_restart(sample_restart());
  // Truncated: the header's length no longer matches.
  expect_refused(blob.substr(0, blob.size() - 10), "truncated or damaged");
  // The archive's bytes overwritten.
  std::string damaged = blob;
  for (std::size_t i = 20; i < damaged.size(); i += 7) damaged[i] = '\x5a';
  expect_refused(damaged, "damaged");
}

TEST(RestartArchive, SessionStateRestoresASessionExactly) {
  const double cutoff = 4.5;
  const auto configurations = argon_configurations(6, cutoff);
  TrainingSessionSettings settings;
  settings.stats_frames = 2;
  settings.steps_per_frame = 2;
  settings.batch_frames = 2;
  settings.validation_fraction = 0.2;
  auto trained = argon_model(cutoff);
  TrainingSession original(trained, settings, MPI_COMM_WORLD);
  for (int k = 0; k < 4; ++k) {
    original.add_frame(configurations[static_cast<std::size_t>(k)]->labelled_frame());
    original.train();
    original.validate();
  }
  ASSERT_GT(original.report().optimizer_steps, 0);
  const std::string state = original.save_state(false);
  const std::string buffer = original.save_buffer_state();

  // A fresh model from the same spec (other weights until loaded) and a fresh session.
  auto fresh = argon_model(cutoff);
  TrainingSession restored(fresh, settings, MPI_COMM_WORLD);
  restored.load_state(state);
  restored.load_buffer_state(buffer);
  EXPECT_EQ(restored.weights_hash(), original.weights_hash());
  EXPECT_TRUE(restored.statistics_ready());
  EXPECT_EQ(restored.report().optimizer_steps, original.report().optimizer_steps);
  EXPECT_EQ(restored.report().force_rmse, original.report().force_rmse);
  EXPECT_EQ(restored.report().buffer_frames, original.report().buffer_frames);

  // Both continue identically: same frames, same batches (the buffer's RNG), same steps.
  for (int k = 4; k < 6; ++k) {
    for (TrainingSession* session : {&original, &restored}) {
      session->add_frame(configurations[static_cast<std::size_t>(k)]->labelled_frame());
      session->train();
      session->validate();
    }
    EXPECT_EQ(restored.weights_hash(), original.weights_hash()) << "frame " << k;
    EXPECT_EQ(restored.report().last_loss, original.report().last_loss);
  }

  // Another model spec is refused before anything is loaded.
  ModelSpec other = small_spec({"Ar"}, "float32", cutoff, 5);
  other.hyperparameters = {{"hidden", {8}}, {"radial_functions", 6}, {"angular_radial_functions", 3}};
  auto different = create_potential(other);
  TrainingSession mismatched(different, settings, MPI_COMM_WORLD);
  const uint64_t before = mismatched.weights_hash();
  try {
    mismatched.load_state(state);
    FAIL() << "loaded the state of another model spec";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("a different model spec?"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mismatched.weights_hash(), before);
  EXPECT_THROW(mismatched.load_state("not an archive"), std::runtime_error);
}

}  // namespace
}  // namespace otf::testing

#include "restart_archive.h"

#include <torch/serialize.h>

#include <cstring>
#include <vector>

#include "state_archive.h"

namespace otf {
namespace {

namespace archive = state_archive;

// The tag every fix otf/train restart blob has started with, in every format.
constexpr char kTag[8] = {'O', 'T', 'F', 'T', 'R', 'A', 'I', 'N'};
const std::string kWhat = "the restart file's fix otf/train state";
// Tag, format (uint32) and payload length (uint64), in every format so far.
constexpr std::size_t kHeaderSize = sizeof(kTag) + sizeof(uint32_t) + sizeof(uint64_t);

// Revisions of format 3: fields added within it, which files written before them lack.
constexpr int kWithReferenceTimes = 1;  // skipped labels, reference and training wall times
constexpr int kWithCalibration = 2;     // accuracy mode's errors and calibration
constexpr int kWithOutlierGuard = 3;    // the outlier guard's counters
constexpr int kWithJournalOffset = 4;   // the label journal's size (resuming after a kill)
constexpr int kWithCheckNextStep = 5;   // the policy's check of the next step (issue 39)
constexpr int kWithEnergyGuard = 6;     // the learned energies' range (the energy guard)
constexpr int kWithCalibrationLabels = 7;  // the labels each calibration sample's model had
constexpr int kWithFirstCountedStep = 8;   // where the policy's verifications are spaced from
constexpr int kWithWatchUntil = 9;         // the steps watched after a label that found the model wrong

// Every rank's replay buffer part: a count, then one byte string per rank.
archive::Field<TrainerRestart> rank_buffers_field() {
  archive::Field<TrainerRestart> entry;
  entry.key = "ranks";
  entry.write = [](torch::serialize::OutputArchive& out, const std::string& key,
                   const TrainerRestart& restart) {
    archive::write_int(out, key, static_cast<int64_t>(restart.rank_buffers.size()));
    for (std::size_t r = 0; r < restart.rank_buffers.size(); ++r)
      archive::write_bytes(out, "buffer/" + std::to_string(r), restart.rank_buffers[r]);
  };
  entry.read = [](torch::serialize::InputArchive& in, const std::string& key,
                  TrainerRestart& restart, const std::string& what) {
    const int64_t ranks = archive::read_int(in, key, what);
    if (ranks < 0) throw std::runtime_error(what + " names a negative number of ranks");
    restart.rank_buffers.clear();
    for (int64_t r = 0; r < ranks; ++r)
      restart.rank_buffers.push_back(archive::read_bytes(in, "buffer/" + std::to_string(r), what));
  };
  entry.reset = [](TrainerRestart& restart) { restart.rank_buffers.clear(); };
  return entry;
}

// The policy's and the trainer's fields, under "policy/<name>" and "trainer/<name>".
template <class Value>
archive::Field<TrainerRestart> policy_field(const char* name, Value PolicyState::*member,
                                            int revision = 0) {
  return archive::field<TrainerRestart>(
      std::string("policy/") + name, [member](auto& r) -> auto& { return r.policy.*member; },
      revision);
}

template <class Value>
archive::Field<TrainerRestart> counter_field(const char* name, Value TrainerCounters::*member,
                                             int revision = 0) {
  return archive::field<TrainerRestart>(
      std::string("trainer/") + name, [member](auto& r) -> auto& { return r.counters.*member; },
      revision);
}

// The archive's fields, each named once: encode_restart writes them, decode_restart reads them.
const std::vector<archive::Field<TrainerRestart>>& restart_fields() {
  using C = TrainerCounters;
  using P = PolicyState;
  static const std::vector<archive::Field<TrainerRestart>> fields = {
      policy_field("reference_drives", &P::reference_drives),
      policy_field("last_labelled_step", &P::last_labelled_step),
      policy_field("last_checked_step", &P::last_checked_step),
      policy_field("last_counted_step", &P::last_counted_step),
      policy_field("model_driven_steps", &P::model_driven_steps),
      policy_field("model_phase_labels", &P::model_phase_labels),
      policy_field("check_next_step", &P::check_next_step, kWithCheckNextStep),
      policy_field("watch_floor", &P::watch_floor, kWithCheckNextStep),
      policy_field("first_counted_step", &P::first_counted_step, kWithFirstCountedStep),
      policy_field("inherited_history", &P::inherited_history, kWithFirstCountedStep),
      policy_field("watch_until", &P::watch_until, kWithWatchUntil),
      counter_field("reference_calls", &C::reference_calls),
      counter_field("last_saved_step", &C::last_saved_step),
      counter_field("max_uncertainty", &C::max_uncertainty),
      counter_field("replicas_differ", &C::replicas_differ),
      counter_field("skipped_labels", &C::skipped_labels, kWithReferenceTimes),
      counter_field("reference_seconds", &C::reference_seconds, kWithReferenceTimes),
      counter_field("training_seconds", &C::training_seconds, kWithReferenceTimes),
      counter_field("predicted_force_error", &C::predicted_force_error, kWithCalibration),
      counter_field("predicted_energy_error", &C::predicted_energy_error, kWithCalibration),
      counter_field("label_force_error", &C::label_force_error, kWithCalibration),
      counter_field("label_energy_error", &C::label_energy_error, kWithCalibration),
      counter_field("label_atoms_above_bound", &C::label_atoms_above_bound, kWithCalibration),
      counter_field("learned_labels", &C::learned_labels, kWithOutlierGuard),
      counter_field("largest_learned_force", &C::largest_learned_force, kWithOutlierGuard),
      counter_field("refused_labels_in_row", &C::refused_labels_in_row, kWithOutlierGuard),
      counter_field("lowest_learned_energy_per_atom", &C::lowest_learned_energy_per_atom,
                    kWithEnergyGuard),
      counter_field("highest_learned_energy_per_atom", &C::highest_learned_energy_per_atom,
                    kWithEnergyGuard),
      counter_field("journal_bytes", &C::journal_bytes, kWithJournalOffset),
      archive::field<TrainerRestart>(
          "calibration", [](auto& r) -> auto& { return r.calibration; }, kWithCalibration),
      archive::field<TrainerRestart>(
          "calibration_labels", [](auto& r) -> auto& { return r.calibration_labels; },
          kWithCalibrationLabels),
      archive::field<TrainerRestart>("session", [](auto& r) -> auto& { return r.session; }),
      rank_buffers_field(),
  };
  return fields;
}

}  // namespace

std::string encode_restart(const TrainerRestart& restart) {
  torch::serialize::OutputArchive out;
  archive::write_fields(out, restart_fields(), restart);
  const std::string bytes = archive::to_bytes(out);
  std::string blob(kTag, sizeof(kTag));
  const uint32_t format = kRestartFormat;
  const uint64_t length = bytes.size();
  blob.append(reinterpret_cast<const char*>(&format), sizeof(format));
  blob.append(reinterpret_cast<const char*>(&length), sizeof(length));
  blob += bytes;
  return blob;
}

std::size_t restart_blob_size(const char* data) {
  if (std::memcmp(data, kTag, sizeof(kTag)) != 0)
    throw RestartFormatError(kWhat + " is not an otf/train training state (another fix's data, "
                                     "or a damaged file)");
  uint64_t length = 0;
  std::memcpy(&length, data + kHeaderSize - sizeof(length), sizeof(length));
  return kHeaderSize + static_cast<std::size_t>(length);
}

TrainerRestart decode_restart(const char* data, std::size_t size) {
  uint32_t format = 0;
  if (size < kHeaderSize || std::memcmp(data, kTag, sizeof(kTag)) != 0)
    throw RestartFormatError(kWhat + " is not an otf/train training state (another fix's data, "
                                     "or a damaged file)");
  std::memcpy(&format, data + sizeof(kTag), sizeof(format));
  if (format == 1 || format == 2)
    throw RestartFormatError(
        kWhat + " has format " + std::to_string(format) +
        ", written by OTF-Torch 0.1 before its training layer; this build reads format " +
        std::to_string(kRestartFormat) +
        ". Continue the run with the OTF-Torch that wrote it, or start a new fix otf/train from "
        "the model its 'save' keyword wrote (pair_style otf <saved model>)");
  if (format > kRestartFormat)
    throw RestartFormatError(kWhat + " has format " + std::to_string(format) +
                             ", newer than this OTF-Torch reads (" +
                             std::to_string(kRestartFormat) + "); update OTF-Torch");
  if (format != kRestartFormat)
    throw RestartFormatError(kWhat + " has an unknown format " + std::to_string(format) +
                             " (a damaged file?)");

  uint64_t length = 0;
  std::memcpy(&length, data + kHeaderSize - sizeof(length), sizeof(length));
  if (length != size - kHeaderSize)
    throw RestartFormatError(kWhat + " is truncated or damaged (" + std::to_string(size) +
                             " bytes, its header says " + std::to_string(kHeaderSize + length) +
                             ")");
  try {
    torch::serialize::InputArchive in;
    archive::load(in, std::string(data + kHeaderSize, length), kWhat);
    TrainerRestart restart;
    archive::read_fields(in, restart_fields(), restart, kWhat);
    return restart;
  } catch (const RestartFormatError&) {
    throw;
  } catch (const std::exception& error) {
    throw RestartFormatError(error.what());
  }
}

}  // namespace otf

#include "restart_archive.h"

#include <torch/serialize.h>

#include <cstring>

#include "archive_fields.h"

namespace otf {
namespace {

// The tag every fix otf/train restart blob has started with, in every format.
constexpr char kTag[8] = {'O', 'T', 'F', 'T', 'R', 'A', 'I', 'N'};
const std::string kWhat = "the restart file's fix otf/train state";
// Tag, format (uint32) and payload length (uint64), in every format so far.
constexpr std::size_t kHeaderSize = sizeof(kTag) + sizeof(uint32_t) + sizeof(uint64_t);

}  // namespace

std::string encode_restart(const TrainerRestart& restart) {
  namespace fields = archive_fields;
  torch::serialize::OutputArchive archive;
  const PolicyState& p = restart.policy;
  fields::write_int(archive, "policy/reference_drives", p.reference_drives ? 1 : 0);
  fields::write_int(archive, "policy/last_labelled_step", p.last_labelled_step);
  fields::write_int(archive, "policy/last_checked_step", p.last_checked_step);
  fields::write_int(archive, "policy/last_counted_step", p.last_counted_step);
  fields::write_int(archive, "policy/model_driven_steps", p.model_driven_steps);
  fields::write_int(archive, "policy/model_phase_labels", p.model_phase_labels);
  const TrainerCounters& c = restart.counters;
  fields::write_int(archive, "trainer/reference_calls", c.reference_calls);
  fields::write_int(archive, "trainer/last_saved_step", c.last_saved_step);
  fields::write_double(archive, "trainer/max_uncertainty", c.max_uncertainty);
  fields::write_int(archive, "trainer/replicas_differ", c.replicas_differ ? 1 : 0);
  fields::write_int(archive, "trainer/skipped_labels", c.skipped_labels);
  fields::write_double(archive, "trainer/reference_seconds", c.reference_seconds);
  fields::write_double(archive, "trainer/training_seconds", c.training_seconds);
  fields::write_double(archive, "trainer/predicted_force_error", c.predicted_force_error);
  fields::write_double(archive, "trainer/predicted_energy_error", c.predicted_energy_error);
  fields::write_double(archive, "trainer/label_force_error", c.label_force_error);
  fields::write_double(archive, "trainer/label_energy_error", c.label_energy_error);
  fields::write_double(archive, "trainer/label_atoms_above_bound", c.label_atoms_above_bound);
  fields::write_int(archive, "trainer/learned_labels", c.learned_labels);
  fields::write_double(archive, "trainer/largest_learned_force", c.largest_learned_force);
  fields::write_int(archive, "trainer/refused_labels_in_row", c.refused_labels_in_row);
  fields::write_bytes(archive, "calibration", restart.calibration);
  fields::write_bytes(archive, "session", restart.session);
  fields::write_int(archive, "ranks", static_cast<int64_t>(restart.rank_buffers.size()));
  for (std::size_t r = 0; r < restart.rank_buffers.size(); ++r)
    fields::write_bytes(archive, "buffer/" + std::to_string(r), restart.rank_buffers[r]);

  const std::string bytes = fields::to_bytes(archive);
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
  namespace fields = archive_fields;
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
    torch::serialize::InputArchive archive;
    fields::from_bytes(archive, std::string(data + kHeaderSize, length), kWhat);
    TrainerRestart restart;
    PolicyState& p = restart.policy;
    p.reference_drives = fields::read_int(archive, "policy/reference_drives", kWhat) != 0;
    p.last_labelled_step = fields::read_int(archive, "policy/last_labelled_step", kWhat);
    p.last_checked_step = fields::read_int(archive, "policy/last_checked_step", kWhat);
    p.last_counted_step = fields::read_int(archive, "policy/last_counted_step", kWhat);
    p.model_driven_steps = fields::read_int(archive, "policy/model_driven_steps", kWhat);
    p.model_phase_labels = fields::read_int(archive, "policy/model_phase_labels", kWhat);
    TrainerCounters& c = restart.counters;
    c.reference_calls = fields::read_int(archive, "trainer/reference_calls", kWhat);
    c.last_saved_step = fields::read_int(archive, "trainer/last_saved_step", kWhat);
    c.max_uncertainty = fields::read_double(archive, "trainer/max_uncertainty", kWhat);
    c.replicas_differ = fields::read_int(archive, "trainer/replicas_differ", kWhat) != 0;
    // Added within format 3: files written before it have no such field.
    try {
      c.skipped_labels = fields::read_int(archive, "trainer/skipped_labels", kWhat);
      c.reference_seconds = fields::read_double(archive, "trainer/reference_seconds", kWhat);
      c.training_seconds = fields::read_double(archive, "trainer/training_seconds", kWhat);
    } catch (const std::runtime_error&) {
      c.skipped_labels = 0;
    }
    try {
      c.predicted_force_error = fields::read_double(archive, "trainer/predicted_force_error", kWhat);
      c.predicted_energy_error =
          fields::read_double(archive, "trainer/predicted_energy_error", kWhat);
      c.label_force_error = fields::read_double(archive, "trainer/label_force_error", kWhat);
      c.label_energy_error = fields::read_double(archive, "trainer/label_energy_error", kWhat);
      c.label_atoms_above_bound =
          fields::read_double(archive, "trainer/label_atoms_above_bound", kWhat);
      restart.calibration = fields::read_bytes(archive, "calibration", kWhat);
    } catch (const std::runtime_error&) {
      restart.calibration.clear();
    }
    try {
      c.learned_labels = fields::read_int(archive, "trainer/learned_labels", kWhat);
      c.largest_learned_force = fields::read_double(archive, "trainer/largest_learned_force", kWhat);
      c.refused_labels_in_row = fields::read_int(archive, "trainer/refused_labels_in_row", kWhat);
    } catch (const std::runtime_error&) {
      c.learned_labels = 0;
      c.largest_learned_force = 0.0;
      c.refused_labels_in_row = 0;
    }
    restart.session = fields::read_bytes(archive, "session", kWhat);
    const int64_t ranks = fields::read_int(archive, "ranks", kWhat);
    if (ranks < 0) throw std::runtime_error(kWhat + " names a negative number of ranks");
    for (int64_t r = 0; r < ranks; ++r)
      restart.rank_buffers.push_back(
          fields::read_bytes(archive, "buffer/" + std::to_string(r), kWhat));
    return restart;
  } catch (const RestartFormatError&) {
    throw;
  } catch (const std::exception& error) {
    throw RestartFormatError(error.what());
  }
}

}  // namespace otf

// One encoding for every saved state (training state, replay buffer, training session, fix
// otf/train restarts): a LibTorch archive whose "kind" and "format" header is checked on read,
// typed fields whose read errors name the state and the field, and field tables that name each
// field once for both save and load (docs/design.md §8.1).
#pragma once

#include <torch/serialize.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace otf::state_archive {

// What a kind of state is called, on disk and in messages.
struct StateKind {
  std::string tag;       // written under "kind", e.g. "otf-torch replay buffer"
  int64_t format;        // the newest format this build writes; a newer one is refused
  std::string noun;      // "replay buffer state": "<noun> format 3 is newer than ..."
  std::string not_this;  // "not a replay buffer state": for bytes of another kind or damaged
};

// A fresh archive with the kind's header, and its bytes.
void write_header(torch::serialize::OutputArchive& archive, const StateKind& kind);
std::string to_bytes(torch::serialize::OutputArchive& archive);

// Loads `bytes` and checks the header; returns the format they were written in. Throws
// std::runtime_error "<not_this>, or a damaged one (...)" for bytes that are no archive,
// "<not_this> (another kind of OTF-Torch archive?)" for another kind, and "<noun> format N is
// newer than this OTF-Torch reads (M); update OTF-Torch".
int64_t load_checked(torch::serialize::InputArchive& archive, const std::string& bytes,
                     const StateKind& kind);
// Loads `bytes` without a header (a restart blob carries its own); throws std::runtime_error
// "<what> is damaged or not an OTF-Torch archive (...)".
void load(torch::serialize::InputArchive& archive, const std::string& bytes,
          const std::string& what);

// Fields. Integers, numbers and text are IValues; byte strings are uint8 tensors, so binary
// bytes survive whatever they hold.
void write_int(torch::serialize::OutputArchive& archive, const std::string& key, int64_t value);
void write_double(torch::serialize::OutputArchive& archive, const std::string& key, double value);
void write_string(torch::serialize::OutputArchive& archive, const std::string& key,
                  const std::string& value);
void write_bytes(torch::serialize::OutputArchive& archive, const std::string& key,
                 const std::string& bytes);

// Each throws std::runtime_error "<what> has no <integer|number|text|byte|tensor> field '<key>'
// (damaged, or written by another version)" when the field is missing or of another type.
int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key,
                 const std::string& what);
double read_double(torch::serialize::InputArchive& archive, const std::string& key,
                   const std::string& what);
std::string read_string(torch::serialize::InputArchive& archive, const std::string& key,
                        const std::string& what);
std::string read_bytes(torch::serialize::InputArchive& archive, const std::string& key,
                       const std::string& what);
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                          const std::string& what);

// ---- field tables ---------------------------------------------------------------------------

// One field of a Record: written and read by the same entry, so save and load cannot drift.
// `revision` 0: in every archive of the format; n > 0: added later within the format, so older
// archives lack it (read_fields then leaves every field of that revision at its default).
template <class Record>
struct Field {
  std::string key;
  int revision = 0;
  std::function<void(torch::serialize::OutputArchive&, const std::string& key, const Record&)>
      write;
  std::function<void(torch::serialize::InputArchive&, const std::string& key, Record&,
                     const std::string& what)>
      read;
  std::function<void(Record&)> reset;  // back to a default-constructed Record's value
};

// A field from an accessor `[](auto& record) -> auto& { return record.member; }` (called on a
// const and a mutable Record). The member's type says the encoding: bool and integers as
// integers, double as a number, std::string as bytes.
template <class Record, class Access>
Field<Record> field(std::string key, Access access, int revision = 0) {
  using Value = std::decay_t<decltype(access(std::declval<Record&>()))>;
  static_assert(std::is_same_v<Value, bool> || std::is_integral_v<Value> ||
                    std::is_same_v<Value, double> || std::is_same_v<Value, std::string>,
                "a field is a bool, an integer, a double or a byte string");
  Field<Record> entry;
  entry.key = std::move(key);
  entry.revision = revision;
  entry.write = [access](torch::serialize::OutputArchive& archive, const std::string& name,
                         const Record& record) {
    const Value& value = access(record);
    if constexpr (std::is_same_v<Value, bool>)
      write_int(archive, name, value ? 1 : 0);
    else if constexpr (std::is_integral_v<Value>)
      write_int(archive, name, static_cast<int64_t>(value));
    else if constexpr (std::is_same_v<Value, double>)
      write_double(archive, name, value);
    else
      write_bytes(archive, name, value);
  };
  entry.read = [access](torch::serialize::InputArchive& archive, const std::string& name,
                        Record& record, const std::string& what) {
    Value& value = access(record);
    if constexpr (std::is_same_v<Value, bool>)
      value = read_int(archive, name, what) != 0;
    else if constexpr (std::is_integral_v<Value>)
      value = static_cast<Value>(read_int(archive, name, what));
    else if constexpr (std::is_same_v<Value, double>)
      value = read_double(archive, name, what);
    else
      value = read_bytes(archive, name, what);
  };
  entry.reset = [access](Record& record) {
    const Record defaults{};
    access(record) = access(defaults);
  };
  return entry;
}

template <class Record>
void write_fields(torch::serialize::OutputArchive& archive,
                  const std::vector<Field<Record>>& fields, const Record& record) {
  for (const Field<Record>& entry : fields) entry.write(archive, entry.key, record);
}

// Reads every field into `record`. A revision-0 field that is missing throws (read_int's
// message); a later revision with any field missing is taken as absent: its fields keep their
// defaults.
template <class Record>
void read_fields(torch::serialize::InputArchive& archive, const std::vector<Field<Record>>& fields,
                 Record& record, const std::string& what) {
  std::vector<int> absent_revisions;
  for (const Field<Record>& entry : fields) {
    if (entry.revision == 0) {
      entry.read(archive, entry.key, record, what);
      continue;
    }
    try {
      entry.read(archive, entry.key, record, what);
    } catch (const std::runtime_error&) {
      absent_revisions.push_back(entry.revision);
    }
  }
  for (const Field<Record>& entry : fields)
    for (const int revision : absent_revisions)
      if (entry.revision == revision) entry.reset(record);
}

}  // namespace otf::state_archive

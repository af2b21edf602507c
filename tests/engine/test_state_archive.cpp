// The one encoding of saved states: the kind/format header refuses other kinds, damaged bytes and
// newer formats with the state's own words; typed fields name a missing or mistyped field; a
// field table writes and reads each field from one entry, and fields added later within a format
// keep their defaults when an older archive lacks them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "expect_error.h"
#include "state_archive.h"

namespace otf::testing {
namespace {

namespace archive = state_archive;

const archive::StateKind kKind{"otf-torch test state", 2, "test state", "not a test state"};

std::string saved(const archive::StateKind& kind) {
  torch::serialize::OutputArchive out;
  archive::write_header(out, kind);
  archive::write_int(out, "count", 7);
  return archive::to_bytes(out);
}

TEST(StateArchive, HeaderIsCheckedOnLoad) {
  torch::serialize::InputArchive in;
  EXPECT_EQ(archive::load_checked(in, saved(kKind), kKind), 2);
  EXPECT_EQ(archive::read_int(in, "count", kKind.noun), 7);

  // An older format of the same kind loads; its number is returned for the reader to use.
  archive::StateKind older = kKind;
  older.format = 1;
  torch::serialize::InputArchive old_in;
  EXPECT_EQ(archive::load_checked(old_in, saved(older), kKind), 1);

  archive::StateKind newer = kKind;
  newer.format = 3;
  expect_error<std::runtime_error>(
      [&] {
        torch::serialize::InputArchive newer_in;
        archive::load_checked(newer_in, saved(newer), kKind);
      },
      {"test state format 3 is newer than this OTF-Torch reads (2); update OTF-Torch"});
  archive::StateKind other = kKind;
  other.tag = "otf-torch other state";
  expect_error<std::runtime_error>(
      [&] {
        torch::serialize::InputArchive other_in;
        archive::load_checked(other_in, saved(other), kKind);
      },
      {"not a test state (another kind of OTF-Torch archive?)"});
  const std::string bytes = saved(kKind);
  for (const std::string& damaged :
       {std::string("not an archive"), bytes.substr(0, bytes.size() / 2)})
    expect_error<std::runtime_error>(
        [&] {
          torch::serialize::InputArchive damaged_in;
          archive::load_checked(damaged_in, damaged, kKind);
        },
        {"not a test state, or a damaged one ("});
  expect_error<std::runtime_error>(
      [&] {
        torch::serialize::InputArchive plain_in;
        archive::load(plain_in, "not an archive", "the thing");
      },
      {"the thing is damaged or not an OTF-Torch archive ("});
}

TEST(StateArchive, TypedFieldsRoundTripAndNameWhatIsMissing) {
  torch::serialize::OutputArchive out;
  archive::write_int(out, "int", -5);
  archive::write_double(out, "double", 0.1);
  archive::write_string(out, "text", "words");
  const std::string binary("a\0b\xff", 4);
  archive::write_bytes(out, "bytes", binary);
  archive::write_bytes(out, "empty", "");
  torch::serialize::InputArchive in;
  archive::load(in, archive::to_bytes(out), "the state");
  EXPECT_EQ(archive::read_int(in, "int", "the state"), -5);
  EXPECT_EQ(archive::read_double(in, "double", "the state"), 0.1);
  EXPECT_EQ(archive::read_string(in, "text", "the state"), "words");
  EXPECT_EQ(archive::read_bytes(in, "bytes", "the state"), binary);
  EXPECT_EQ(archive::read_bytes(in, "empty", "the state"), "");
  EXPECT_EQ(archive::read_tensor(in, "bytes", "the state").numel(), 4);

  expect_error<std::runtime_error>(
      [&] { archive::read_int(in, "absent", "the state"); },
      {"the state has no integer field 'absent'", "(damaged, or written by another version)"});
  expect_error<std::runtime_error>([&] { archive::read_int(in, "double", "the state"); },
                                   {"the state has no integer field 'double'"});
  expect_error<std::runtime_error>([&] { archive::read_double(in, "int", "the state"); },
                                   {"no number field 'int'"});
  expect_error<std::runtime_error>([&] { archive::read_string(in, "int", "the state"); },
                                   {"no text field 'int'"});
  expect_error<std::runtime_error>([&] { archive::read_bytes(in, "absent", "the state"); },
                                   {"no tensor field 'absent'"});
}

struct Record {
  bool flag = false;
  int64_t count = 0;
  double ratio = -1.0;  // a default that is not zero
  std::string blob;
  int64_t added_later = 3;
  double also_added_later = -2.0;
};

std::vector<archive::Field<Record>> record_fields(bool with_later_revision) {
  std::vector<archive::Field<Record>> fields = {
      archive::field<Record>(
          "flag", [](auto& r) -> auto& { return r.flag; }),
      archive::field<Record>(
          "count", [](auto& r) -> auto& { return r.count; }),
      archive::field<Record>(
          "ratio", [](auto& r) -> auto& { return r.ratio; }),
      archive::field<Record>(
          "blob", [](auto& r) -> auto& { return r.blob; }),
  };
  if (with_later_revision) {
    fields.push_back(archive::field<Record>(
        "added_later", [](auto& r) -> auto& { return r.added_later; }, 1));
    fields.push_back(archive::field<Record>(
        "also_added_later", [](auto& r) -> auto& { return r.also_added_later; }, 1));
  }
  return fields;
}

std::string written(const Record& record, bool with_later_revision) {
  torch::serialize::OutputArchive out;
  archive::write_fields(out, record_fields(with_later_revision), record);
  return archive::to_bytes(out);
}

TEST(StateArchive, FieldTableWritesAndReadsEveryField) {
  Record record;
  record.flag = true;
  record.count = 42;
  record.ratio = 0.375;
  record.blob = std::string("\0x", 2);
  record.added_later = 9;
  record.also_added_later = 1.5;
  torch::serialize::InputArchive in;
  archive::load(in, written(record, true), "the record");
  Record back;
  archive::read_fields(in, record_fields(true), back, "the record");
  EXPECT_TRUE(back.flag);
  EXPECT_EQ(back.count, 42);
  EXPECT_EQ(back.ratio, 0.375);
  EXPECT_EQ(back.blob, record.blob);
  EXPECT_EQ(back.added_later, 9);
  EXPECT_EQ(back.also_added_later, 1.5);
}

TEST(StateArchive, FieldsOfALaterRevisionKeepDefaultsInOlderArchives) {
  Record record;
  record.count = 5;
  record.added_later = 9;
  torch::serialize::InputArchive in;
  archive::load(in, written(record, false), "the record");
  Record back;
  back.added_later = 100;  // overwritten by the default: the revision is absent
  archive::read_fields(in, record_fields(true), back, "the record");
  EXPECT_EQ(back.count, 5);
  EXPECT_EQ(back.added_later, 3);
  EXPECT_EQ(back.also_added_later, -2.0);

  // A field of the first revision is required.
  torch::serialize::OutputArchive partial;
  archive::write_int(partial, "flag", 1);
  torch::serialize::InputArchive partial_in;
  archive::load(partial_in, archive::to_bytes(partial), "the record");
  expect_error<std::runtime_error>(
      [&] { archive::read_fields(partial_in, record_fields(true), back, "the record"); },
      {"the record has no integer field 'count'"});
}

}  // namespace
}  // namespace otf::testing

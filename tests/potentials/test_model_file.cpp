// otf model file: save/load reproduces every tensor bit, the spec and the training metadata; files
// are written atomically; every kind of damaged or foreign input is refused with its own message.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "expect_error.h"
#include "model_file.h"
#include "potential_registry.h"

namespace {

using nlohmann::json;
using otf::testing::expect_error;

constexpr size_t kMagicSize = 16;
constexpr size_t kPreambleSize = 44;  // magic, u32 version, u64 header, u64 payload, u64 checksum

json spec_json() {
  return json::parse(R"({"elements": ["Si","C"], "cutoff": 4.5, "committee_size": 3,
                         "hyperparameters": {"hidden": [16, 16]}})");
}

// A model whose every floating tensor differs from its initial values, with training metadata.
std::shared_ptr<otf::Potential> trained_model(const std::string& dtype, uint64_t seed) {
  json spec = spec_json();
  spec["dtype"] = dtype;
  spec["seed"] = seed;
  auto model = otf::create_potential(otf::model_spec_from_json(spec));
  torch::NoGradGuard no_grad;
  torch::manual_seed(static_cast<uint64_t>(seed) + 100);
  for (auto& item : model->named_parameters(true))
    item.value().add_(torch::randn_like(item.value()));
  for (auto& item : model->named_buffers(true))
    if (item.value().is_floating_point()) item.value().add_(torch::randn_like(item.value()));
  model->training_metadata().optimizer_steps = 321;
  model->training_metadata().frames_seen = 4567;
  model->training_metadata().precision = "bfloat16";
  return model;
}

// Floating tensors reinterpreted as integers of their width: equal means bitwise equal (-0.0 and
// 0.0, or two NaN payloads, would compare equal as floats).
torch::Tensor bits(const torch::Tensor& tensor) {
  const torch::Tensor contiguous = tensor.detach().contiguous();
  switch (contiguous.scalar_type()) {
    case torch::kFloat64:
      return contiguous.view(torch::kInt64);
    case torch::kFloat32:
      return contiguous.view(torch::kInt32);
    default:
      return contiguous;
  }
}

void expect_same_tensors(const std::string& what,
                         const torch::OrderedDict<std::string, torch::Tensor>& a,
                         const torch::OrderedDict<std::string, torch::Tensor>& b) {
  ASSERT_EQ(a.keys(), b.keys()) << what;
  ASSERT_GT(a.size(), 0u) << what;
  for (const auto& item : a) {
    const torch::Tensor& other = b[item.key()];
    EXPECT_EQ(item.value().scalar_type(), other.scalar_type()) << item.key();
    EXPECT_TRUE(torch::equal(bits(item.value()), bits(other))) << what << " " << item.key();
  }
}

void expect_same_model(const otf::Potential& a, const otf::Potential& b) {
  EXPECT_EQ(otf::to_json(a.spec()), otf::to_json(b.spec()));
  EXPECT_EQ(a.training_metadata().to_json(), b.training_metadata().to_json());
  expect_same_tensors("parameter", a.named_parameters(true), b.named_parameters(true));
  expect_same_tensors("buffer", a.named_buffers(true), b.named_buffers(true));
}

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t hash = 14695981039346656037ULL;
  for (const unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

uint64_t read_u64(const std::string& bytes, size_t offset) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

void write_u64(std::string& bytes, size_t offset, uint64_t value) {
  for (size_t i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

struct Sections {
  std::string preamble, header, payload;
};

Sections split(const std::string& bytes) {
  const uint64_t header_size = read_u64(bytes, kMagicSize + 4);
  return {bytes.substr(0, kPreambleSize), bytes.substr(kPreambleSize, header_size),
          bytes.substr(kPreambleSize + header_size)};
}

// A consistent file around a replaced header: lengths and checksum recomputed.
std::string with_header(const std::string& bytes, const std::string& header) {
  Sections sections = split(bytes);
  write_u64(sections.preamble, kMagicSize + 4, header.size());
  write_u64(sections.preamble, kMagicSize + 20, fnv1a64(header + sections.payload));
  return sections.preamble + header + sections.payload;
}

std::string temporary_path(const std::string& name) {
  return ::testing::TempDir() + "otf_model_" + std::to_string(::getpid()) + "_" + name;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void expect_load_error(const std::string& bytes, const std::vector<std::string>& fragments) {
  expect_error<std::runtime_error>([&] { otf::load_model_from_bytes(bytes); }, fragments);
}

TEST(ModelFile, Float32RoundTripIsBitwise) {
  const auto model = trained_model("float32", 7);
  const std::string bytes = otf::save_model_to_bytes(*model);
  const auto loaded = otf::load_model_from_bytes(bytes);
  expect_same_model(*model, *loaded);
  EXPECT_EQ(loaded->dtype(), torch::kFloat32);
  // The weights were changed after construction, so a fresh model must differ.
  const auto fresh = otf::create_potential(model->spec());
  bool any_different = false;
  for (const auto& item : fresh->named_parameters(true))
    any_different =
        any_different || !torch::equal(item.value(), loaded->named_parameters(true)[item.key()]);
  EXPECT_TRUE(any_different);
  // Saving again gives the same bytes: nothing is lost or reordered.
  EXPECT_EQ(otf::save_model_to_bytes(*loaded), bytes);
}

TEST(ModelFile, Float64RoundTripIsBitwise) {
  const auto model = trained_model("float64", 11);
  EXPECT_EQ(model->dtype(), torch::kFloat64);
  const auto loaded = otf::load_model_from_bytes(otf::save_model_to_bytes(*model));
  expect_same_model(*model, *loaded);
  EXPECT_EQ(loaded->dtype(), torch::kFloat64);
}

TEST(ModelFile, HeaderDescribesTheModel) {
  const auto model = trained_model("float32", 7);
  const std::string bytes = otf::save_model_to_bytes(*model);
  ASSERT_GE(bytes.size(), kPreambleSize);
  EXPECT_EQ(bytes.substr(0, kMagicSize), std::string("OTF-Torch model\n"));
  EXPECT_EQ(static_cast<unsigned char>(bytes[kMagicSize]), 1);  // version, little-endian
  const Sections sections = split(bytes);
  EXPECT_EQ(read_u64(bytes, kMagicSize + 12), sections.payload.size());
  EXPECT_EQ(read_u64(bytes, kMagicSize + 20), fnv1a64(sections.header + sections.payload));
  const json header = json::parse(sections.header);
  EXPECT_EQ(header.at("format"), "otf-torch-model");
  EXPECT_EQ(header.at("otf_torch_version"), OTF_VERSION);
  EXPECT_EQ(header.at("spec"), otf::to_json(model->spec()));
  // The architecture completed the hyperparameters: the file names every one.
  EXPECT_GT(header.at("spec").at("hyperparameters").size(), 1u);
  EXPECT_EQ(header.at("training"), model->training_metadata().to_json());
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters(true)) names.push_back(item.key());
  for (const auto& item : model->named_buffers(true)) names.push_back(item.key());
  EXPECT_EQ(header.at("tensors").get<std::vector<std::string>>(), names);
}

TEST(ModelFile, SaveAndLoadAFile) {
  const auto model = trained_model("float32", 3);
  const std::string path = temporary_path("roundtrip.otf");
  otf::save_model(*model, path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir()))
    EXPECT_EQ(entry.path().string().find("roundtrip.otf.tmp"), std::string::npos) << entry.path();
  expect_same_model(*model, *otf::load_model(path));
  // Overwriting an existing file works the same way.
  const auto other = trained_model("float64", 4);
  otf::save_model(*other, path);
  expect_same_model(*other, *otf::load_model(path));
  expect_same_model(*other, *otf::load_model_or_spec(path));
  std::remove(path.c_str());
}

TEST(ModelFile, SaveErrorsNameThePath) {
  const auto model = trained_model("float32", 3);
  const std::string path = temporary_path("no_such_folder") + "/model.otf";
  expect_error<std::runtime_error>([&] { otf::save_model(*model, path); },
                                   {"cannot write model file", path});
}

TEST(ModelFile, LoadOrSpecBuildsAFreshModelFromASpecFile) {
  const std::string path = temporary_path("spec.json");
  write_file(path, "  \n" + spec_json().dump(2));
  const auto model = otf::load_model_or_spec(path);
  const auto expected = otf::create_potential(otf::model_spec_from_json(spec_json()));
  expect_same_model(*expected, *model);
  EXPECT_EQ(model->spec().elements, (std::vector<std::string>{"Si", "C"}));
  EXPECT_EQ(model->committee_size(), 3);
  EXPECT_EQ(model->training_metadata().optimizer_steps, 0);
  // The same spec given to load_model is a foreign file.
  expect_error<std::runtime_error>(
      [&] { otf::load_model(path); },
      {"cannot read model file '" + path + "'", "not an OTF-Torch model file"});
  // A spec the architecture refuses names the file.
  json bad = spec_json();
  bad["hyperparameters"]["hidden"] = "wide";
  write_file(path, bad.dump());
  expect_error<std::invalid_argument>([&] { otf::load_model_or_spec(path); },
                                      {"hidden", "\"wide\"", path});
  std::remove(path.c_str());
}

TEST(ModelFileErrors, MissingFile) {
  const std::string path = temporary_path("missing.otf");
  expect_error<std::runtime_error>([&] { otf::load_model(path); },
                                   {"cannot read model file '" + path + "'", "No such file"});
  expect_error<std::runtime_error>([&] { otf::load_model_or_spec(path); }, {path, "No such file"});
}

TEST(ModelFileErrors, EmptyFile) {
  expect_load_error("", {"not an OTF-Torch model file", "empty"});
  const std::string path = temporary_path("empty.otf");
  write_file(path, "");
  expect_error<std::runtime_error>(
      [&] { otf::load_model(path); },
      {"cannot read model file '" + path + "'", "not an OTF-Torch model file"});
  expect_error<std::runtime_error>([&] { otf::load_model_or_spec(path); }, {path, "empty"});
  std::remove(path.c_str());
}

TEST(ModelFileErrors, ForeignFile) {
  expect_load_error("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n",
                    {"not an OTF-Torch model file"});
  expect_load_error(spec_json().dump(), {"not an OTF-Torch model file"});
  expect_load_error("OTF-Torch models are great, this is a README about them.",
                    {"not an OTF-Torch model file"});
  // A prefix of the magic is a truncated model file rather than a foreign one.
  expect_load_error("OTF-Torch", {"truncated", "file has 9"});
}

TEST(ModelFileErrors, Truncated) {
  const std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  const Sections sections = split(bytes);
  expect_load_error(bytes.substr(0, 10), {"truncated", "44 bytes", "file has 10"});
  expect_load_error(bytes.substr(0, 30), {"truncated", "file has 30"});
  const std::string total = std::to_string(bytes.size());
  for (const size_t size :
       {kPreambleSize, kPreambleSize + sections.header.size() / 2,
        kPreambleSize + sections.header.size(), bytes.size() / 2 + 7, bytes.size() - 1})
    expect_load_error(bytes.substr(0, size), {"truncated: header says " + total +
                                              " bytes, file has " + std::to_string(size)});
}

TEST(ModelFileErrors, TrailingBytesAreCorrupt) {
  const std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  expect_load_error(bytes + "x", {"corrupt", "trailing"});
}

TEST(ModelFileErrors, FlippedBytesAreCorrupt) {
  const std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  const Sections sections = split(bytes);
  for (const size_t offset : {kPreambleSize + 2, kPreambleSize + sections.header.size() / 2,
                              kPreambleSize + sections.header.size() + 100, bytes.size() - 30}) {
    std::string damaged = bytes;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 0x10);
    expect_load_error(damaged, {"corrupt: checksum mismatch"});
  }
  std::string damaged_checksum = bytes;
  damaged_checksum[kMagicSize + 25] ^= 0x01;
  expect_load_error(damaged_checksum, {"corrupt: checksum mismatch"});
}

TEST(ModelFileErrors, NewerVersionIsNamedBeforeTheChecksum) {
  std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  bytes[kMagicSize] = 2;  // checksum left as it was: the version check comes first
  expect_load_error(bytes, {"written by a newer OTF-Torch (model format version 2; this build "
                            "reads up to 1)"});
}

TEST(ModelFileErrors, UnknownArchitecture) {
  const std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  json header = json::parse(split(bytes).header);
  header["spec"]["architecture"] = "graph-transformer";
  expect_load_error(with_header(bytes, header.dump()),
                    {"unknown architecture 'graph-transformer'", "behler-parrinello"});
}

TEST(ModelFileErrors, HeaderAndWeightsMustAgree) {
  const std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  const json header = json::parse(split(bytes).header);
  const std::string first = header.at("tensors").at(0);

  // The header's spec builds a model with other shapes than the stored weights.
  json wider = header;
  wider["spec"]["hyperparameters"]["hidden"] = {16, 17};
  expect_load_error(with_header(bytes, wider.dump()), {"header/weights mismatch: tensor '"});

  // A float64 model from float32 weights.
  json other_dtype = header;
  other_dtype["spec"]["dtype"] = "float64";
  expect_load_error(with_header(bytes, other_dtype.dump()),
                    {"header/weights mismatch: tensor '" + first + "'", "Float", "Double"});

  // A tensor listed that the model does not have.
  json extra = header;
  extra["tensors"].push_back("no.such.tensor");
  expect_load_error(with_header(bytes, extra.dump()),
                    {"header/weights mismatch: tensor 'no.such.tensor'"});

  // More committee members than the file holds weights for.
  json bigger = header;
  bigger["spec"]["committee_size"] = 4;
  expect_load_error(with_header(bytes, bigger.dump()), {"header/weights mismatch: tensor '"});
}

TEST(ModelFileErrors, MalformedHeader) {
  const std::string bytes = otf::save_model_to_bytes(*trained_model("float32", 5));
  expect_load_error(with_header(bytes, "{\"format\": "), {"corrupt", "not JSON"});
  json header = json::parse(split(bytes).header);
  header["format"] = "something-else";
  expect_load_error(with_header(bytes, header.dump()), {"not an OTF-Torch model file"});
  header["format"] = "otf-torch-model";
  header["spec"]["cutoff"] = -1;
  expect_load_error(with_header(bytes, header.dump()), {"'cutoff'", "-1"});
}

}  // namespace

// otf::ModelSpec: a spec parses with its defaults, round-trips through JSON, and every kind of bad
// spec is refused with a message that names the key, the value and what would be accepted.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "expect_error.h"
#include "model_spec.h"

namespace {

using nlohmann::json;
using otf::model_spec_from_json;
using otf::ModelSpec;
using otf::testing::expect_error;

json minimal_spec() { return json{{"elements", {"Si", "C"}}, {"cutoff", 4.5}}; }

// The minimal spec with `key` set to `value`.
json with(const std::string& key, const json& value) {
  json spec = minimal_spec();
  spec[key] = value;
  return spec;
}

void expect_rejected(const json& spec, const std::vector<std::string>& fragments) {
  std::vector<std::string> all{"model spec: "};
  all.insert(all.end(), fragments.begin(), fragments.end());
  expect_error<std::invalid_argument>([&] { model_spec_from_json(spec); }, all);
}

void expect_same(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.cutoff, b.cutoff);
  EXPECT_EQ(a.units, b.units);
  EXPECT_EQ(a.committee_size, b.committee_size);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.hyperparameters, b.hyperparameters);
}

class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& contents)
      : path_(::testing::TempDir() + "otf_spec_" + std::to_string(::getpid()) + "_" +
              std::to_string(counter_++) + ".json") {
    std::ofstream(path_) << contents;
  }
  ~TemporaryFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

TEST(ModelSpec, MinimalSpecTakesTheDefaults) {
  const ModelSpec spec = model_spec_from_json(minimal_spec());
  const ModelSpec defaults;
  EXPECT_EQ(spec.architecture, "behler-parrinello");
  EXPECT_EQ(spec.elements, (std::vector<std::string>{"Si", "C"}));
  EXPECT_EQ(spec.cutoff, 4.5);
  EXPECT_EQ(spec.units, defaults.units);
  EXPECT_EQ(spec.committee_size, defaults.committee_size);
  EXPECT_EQ(spec.dtype, defaults.dtype);
  EXPECT_EQ(spec.seed, defaults.seed);
  EXPECT_EQ(spec.hyperparameters, json::object());
  EXPECT_EQ(spec.num_species(), 2);
}

TEST(ModelSpec, EveryKeyIsRead) {
  const json input{{"architecture", "my-net"},
                   {"elements", {"H", "O", "Cu"}},
                   {"cutoff", 6.25},
                   {"units", "real"},
                   {"committee_size", 64},
                   {"dtype", "float64"},
                   {"seed", 18446744073709551615ULL},
                   {"hyperparameters", {{"hidden", {16, 16}}, {"activation", "tanh"}}}};
  const ModelSpec spec = model_spec_from_json(input);
  EXPECT_EQ(spec.architecture, "my-net");
  EXPECT_EQ(spec.elements, (std::vector<std::string>{"H", "O", "Cu"}));
  EXPECT_EQ(spec.cutoff, 6.25);
  EXPECT_EQ(spec.units, "real");
  EXPECT_EQ(spec.committee_size, 64);
  EXPECT_EQ(spec.dtype, "float64");
  EXPECT_EQ(spec.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(spec.hyperparameters, input["hyperparameters"]);
  EXPECT_EQ(otf::to_json(spec), input);
}

TEST(ModelSpec, IntegerCutoffAndZeroSeedAreAccepted) {
  json input = with("cutoff", 5);
  input["seed"] = 0;
  const ModelSpec spec = model_spec_from_json(input);
  EXPECT_EQ(spec.cutoff, 5.0);
  EXPECT_EQ(spec.seed, 0u);
}

TEST(ModelSpec, EverySupportedUnitStyleIsAccepted) {
  EXPECT_EQ(otf::supported_unit_styles(),
            (std::vector<std::string>{"metal", "real", "si", "cgs", "electron", "micro", "nano"}));
  for (const auto& style : otf::supported_unit_styles())
    EXPECT_EQ(model_spec_from_json(with("units", style)).units, style);
}

TEST(ModelSpec, RoundTripThroughJsonKeepsEveryField) {
  ModelSpec spec;
  spec.architecture = "behler-parrinello";
  spec.elements = {"Si", "C"};
  spec.cutoff = 0.1 + 0.2;  // not exactly representable in short decimal: digits must survive
  spec.units = "electron";
  spec.committee_size = 3;
  spec.dtype = "float64";
  spec.seed = 123456789012345ULL;
  spec.hyperparameters = {{"hidden", {16, 16}}, {"nested", {{"a", 1.5}}}};
  const json written = otf::to_json(spec);
  for (const char* key : {"architecture", "elements", "cutoff", "units", "committee_size", "dtype",
                          "seed", "hyperparameters"})
    EXPECT_TRUE(written.contains(key)) << key;
  EXPECT_EQ(written.size(), 8u);
  expect_same(model_spec_from_json(written), spec);
  // Through text too, as a model file stores it.
  expect_same(model_spec_from_json(json::parse(written.dump())), spec);
}

TEST(ModelSpec, SpeciesIndexIsThePositionInElements) {
  const ModelSpec spec = model_spec_from_json(minimal_spec());
  EXPECT_EQ(spec.species_index("Si"), 0);
  EXPECT_EQ(spec.species_index("C"), 1);
  EXPECT_EQ(spec.species_index("O"), -1);
  EXPECT_EQ(spec.species_index("si"), -1);
}

TEST(ModelSpecErrors, NotAnObject) {
  expect_rejected(json::array({1, 2}), {"expected a JSON object", "[1,2]"});
  expect_rejected(json("spec"), {"expected a JSON object"});
}

TEST(ModelSpecErrors, UnknownKeyListsTheAcceptedKeys) {
  expect_rejected(with("cutof", 4.0), {"unknown key 'cutof'",
                                       "accepted keys: architecture, elements, cutoff, units, "
                                       "committee_size, dtype, seed, hyperparameters"});
}

TEST(ModelSpecErrors, MissingRequiredKeys) {
  json no_elements = minimal_spec();
  no_elements.erase("elements");
  expect_rejected(no_elements, {"missing required key 'elements'", "chemical symbols"});
  json no_cutoff = minimal_spec();
  no_cutoff.erase("cutoff");
  expect_rejected(no_cutoff, {"missing required key 'cutoff'", "> 0"});
}

TEST(ModelSpecErrors, Architecture) {
  expect_rejected(with("architecture", 3), {"'architecture'", "3", "non-empty string"});
  expect_rejected(with("architecture", ""), {"'architecture'", "\"\"", "non-empty string"});
}

TEST(ModelSpecErrors, Elements) {
  const std::string expected = "non-empty array of distinct chemical symbols";
  expect_rejected(with("elements", "Si"), {"'elements'", "\"Si\"", expected});
  expect_rejected(with("elements", json::array()), {"'elements'", "[]", expected});
  expect_rejected(with("elements", {"Si", 14}),
                  {"'elements'", "[\"Si\",14]", expected, "14 is not a symbol"});
  expect_rejected(with("elements", {"Si", ""}), {"'elements'", "\"\" is not a symbol"});
  expect_rejected(with("elements", {"Si", "C", "Si"}),
                  {"'elements'", "[\"Si\",\"C\",\"Si\"]", "\"Si\" appears twice"});
}

TEST(ModelSpecErrors, Cutoff) {
  const std::string expected = "a finite number > 0";
  expect_rejected(with("cutoff", 0.0), {"'cutoff'", "0.0", expected});
  expect_rejected(with("cutoff", -1.5), {"'cutoff'", "-1.5", expected});
  expect_rejected(with("cutoff", "4.5"), {"'cutoff'", "\"4.5\"", expected});
  expect_rejected(with("cutoff", std::numeric_limits<double>::infinity()), {"'cutoff'", expected});
  expect_rejected(with("cutoff", std::nan("")), {"'cutoff'", expected});
}

TEST(ModelSpecErrors, Units) {
  const std::string listed = "one of metal, real, si, cgs, electron, micro, nano";
  expect_rejected(with("units", "lj"), {"'units'", "\"lj\"", listed, "'lj' is refused"});
  expect_rejected(with("units", "Metal"), {"'units'", "\"Metal\"", listed});
  expect_rejected(with("units", 1), {"'units'", "1", listed});
}

TEST(ModelSpecErrors, CommitteeSize) {
  const std::string expected = "an integer from 1 to 64";
  expect_rejected(with("committee_size", 0), {"'committee_size'", "0", expected});
  expect_rejected(with("committee_size", -2), {"'committee_size'", "-2", expected});
  expect_rejected(with("committee_size", 65), {"'committee_size'", "65", expected});
  expect_rejected(with("committee_size", 2.5), {"'committee_size'", "2.5", expected});
  expect_rejected(with("committee_size", 4.0), {"'committee_size'", "4.0", expected});
  expect_rejected(with("committee_size", "4"), {"'committee_size'", "\"4\"", expected});
  expect_rejected(with("committee_size", 18446744073709551615ULL),
                  {"'committee_size'", "18446744073709551615", expected});
}

TEST(ModelSpecErrors, Dtype) {
  const std::string expected = "\"float32\" or \"float64\"";
  expect_rejected(with("dtype", "float16"), {"'dtype'", "\"float16\"", expected});
  expect_rejected(with("dtype", "fp32"), {"'dtype'", "\"fp32\"", expected});
  expect_rejected(with("dtype", 32), {"'dtype'", "32", expected});
}

TEST(ModelSpecErrors, Seed) {
  const std::string expected = "a non-negative integer";
  expect_rejected(with("seed", -1), {"'seed'", "-1", expected});
  expect_rejected(with("seed", 1.5), {"'seed'", "1.5", expected});
  expect_rejected(with("seed", "7"), {"'seed'", "\"7\"", expected});
}

TEST(ModelSpecErrors, Hyperparameters) {
  expect_rejected(with("hyperparameters", json::array({16, 16})),
                  {"'hyperparameters'", "[16,16]", "a JSON object"});
  expect_rejected(with("hyperparameters", nullptr), {"'hyperparameters'", "null", "a JSON object"});
}

TEST(ModelSpecErrors, LongValuesAreShortened) {
  json huge = json::array();
  // Digits only: g++ 12 at -O3 in C++20 flags "X" + std::to_string(i) with a false
  // -Wstringop-overflow (GCC bug 105329).
  for (int i = 0; i < 1000; ++i) huge.push_back(std::to_string(100000 + i));
  huge.push_back(1);
  try {
    model_spec_from_json(with("elements", huge));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_LT(std::string(error.what()).size(), 400u) << error.what();
    EXPECT_NE(std::string(error.what()).find("..."), std::string::npos);
  }
}

TEST(ModelSpecFile, ReadsAFile) {
  const TemporaryFile file(
      R"({"elements": ["Si","C"], "cutoff": 4.5, "committee_size": 3,
          "hyperparameters": {"hidden": [16, 16]}})");
  const ModelSpec spec = otf::read_model_spec_file(file.path());
  EXPECT_EQ(spec.elements, (std::vector<std::string>{"Si", "C"}));
  EXPECT_EQ(spec.cutoff, 4.5);
  EXPECT_EQ(spec.committee_size, 3);
  EXPECT_EQ(spec.hyperparameters, (json{{"hidden", {16, 16}}}));
}

TEST(ModelSpecFile, ErrorsNameTheFile) {
  const std::string missing = ::testing::TempDir() + "otf_no_such_spec.json";
  expect_error<std::invalid_argument>([&] { otf::read_model_spec_file(missing); },
                                      {"model spec: ", "cannot read", missing});
  const TemporaryFile not_json("{\"elements\": [\"Si\"], \"cutoff\": }");
  expect_error<std::invalid_argument>(
      [&] { otf::read_model_spec_file(not_json.path()); },
      {"model spec: ", not_json.path(), "not valid JSON", "parse error"});
  const TemporaryFile bad_value(R"({"elements": ["Si"], "cutoff": -3})");
  expect_error<std::invalid_argument>([&] { otf::read_model_spec_file(bad_value.path()); },
                                      {"model spec: ", "'cutoff'", "-3", bad_value.path()});
}

TEST(TrainingMetadata, RoundTrip) {
  otf::TrainingMetadata metadata;
  metadata.optimizer_steps = 1234;
  metadata.frames_seen = 98765432109LL;
  metadata.precision = "bfloat16";
  const json written = metadata.to_json();
  EXPECT_EQ(
      written,
      (json{{"optimizer_steps", 1234}, {"frames_seen", 98765432109LL}, {"precision", "bfloat16"}}));
  const auto read = otf::TrainingMetadata::from_json(written);
  EXPECT_EQ(read.optimizer_steps, 1234);
  EXPECT_EQ(read.frames_seen, 98765432109LL);
  EXPECT_EQ(read.precision, "bfloat16");
}

TEST(TrainingMetadata, UntrainedDefaultsAndErrors) {
  const auto untrained = otf::TrainingMetadata::from_json(json::object());
  EXPECT_EQ(untrained.optimizer_steps, 0);
  EXPECT_EQ(untrained.frames_seen, 0);
  EXPECT_EQ(untrained.precision, "");
  expect_error<std::invalid_argument>(
      [] {
        otf::TrainingMetadata::from_json(json{{"frames_seen", -1}});
      },
      {"training metadata", "'frames_seen'", "-1", "non-negative integer"});
  expect_error<std::invalid_argument>(
      [] {
        otf::TrainingMetadata::from_json(json{{"precision", 16}});
      },
      {"training metadata", "'precision'", "16"});
  expect_error<std::invalid_argument>([] { otf::TrainingMetadata::from_json(json::array()); },
                                      {"training metadata", "JSON object"});
}

}  // namespace

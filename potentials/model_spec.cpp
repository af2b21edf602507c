// Parsing and validation of model specs and training metadata. A spec is hand-written by users, so
// every rejection says which key, what value it had and what would be accepted.
#include "model_spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>

namespace otf {
namespace {

constexpr int64_t kMaxCommitteeSize = 64;

const std::vector<std::string>& accepted_keys() {
  static const std::vector<std::string> keys{"architecture", "elements",       "cutoff",
                                             "units",        "committee_size", "dtype",
                                             "seed",         "hyperparameters"};
  return keys;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : ", ") + word;
  return text;
}

// The offending value as JSON, shortened so that a large object does not drown the message.
std::string shown(const nlohmann::json& value) {
  constexpr size_t kMaxShown = 120;
  std::string text = value.dump();
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

[[noreturn]] void reject(const std::string& key, const nlohmann::json& value,
                         const std::string& expected) {
  throw std::invalid_argument("model spec: key '" + key + "' has value " + shown(value) +
                              " (expected " + expected + ")");
}

std::vector<std::string> parse_elements(const nlohmann::json& value) {
  const std::string expected =
      "a non-empty array of distinct chemical symbols, e.g. [\"Si\", \"C\"]";
  if (!value.is_array() || value.empty()) reject("elements", value, expected);
  std::vector<std::string> elements;
  for (const auto& element : value) {
    if (!element.is_string() || element.get<std::string>().empty())
      reject("elements", value, expected + "; " + shown(element) + " is not a symbol");
    const auto symbol = element.get<std::string>();
    if (std::find(elements.begin(), elements.end(), symbol) != elements.end())
      reject("elements", value, expected + "; \"" + symbol + "\" appears twice");
    elements.push_back(symbol);
  }
  return elements;
}

// An integer JSON value that fits int64_t; nothing for floats (even 3.0) and huge unsigned values.
std::optional<int64_t> as_int64(const nlohmann::json& value) {
  if (!value.is_number_integer()) return std::nullopt;
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return std::nullopt;
  return value.get<int64_t>();
}

int64_t parse_integer(const std::string& key, const nlohmann::json& value, int64_t minimum,
                      int64_t maximum, const std::string& expected) {
  const auto number = as_int64(value);
  if (!number || *number < minimum || *number > maximum) reject(key, value, expected);
  return *number;
}

// TrainingMetadata counters: a non-negative integer, 0 when absent.
int64_t metadata_counter(const nlohmann::json& json, const std::string& key) {
  if (!json.contains(key)) return 0;
  const auto& value = json.at(key);
  const auto number = as_int64(value);
  if (!number || *number < 0)
    throw std::invalid_argument("training metadata: key '" + key + "' has value " + shown(value) +
                                " (expected a non-negative integer)");
  return *number;
}

}  // namespace

int64_t ModelSpec::species_index(const std::string& element) const {
  const auto found = std::find(elements.begin(), elements.end(), element);
  return found == elements.end() ? -1 : static_cast<int64_t>(found - elements.begin());
}

const std::vector<std::string>& supported_unit_styles() {
  static const std::vector<std::string> styles{"metal",    "real",  "si",  "cgs",
                                               "electron", "micro", "nano"};
  return styles;
}

ModelSpec model_spec_from_json(const nlohmann::json& json) {
  if (!json.is_object())
    throw std::invalid_argument("model spec: expected a JSON object with keys " +
                                joined(accepted_keys()) + ", got " + shown(json));
  for (const auto& item : json.items()) {
    const auto& keys = accepted_keys();
    if (std::find(keys.begin(), keys.end(), item.key()) == keys.end())
      throw std::invalid_argument("model spec: unknown key '" + item.key() +
                                  "' (accepted keys: " + joined(keys) + ")");
  }
  for (const std::string required : {"elements", "cutoff"}) {
    if (!json.contains(required))
      throw std::invalid_argument("model spec: missing required key '" + required + "' (" +
                                  (required == "elements" ? "a non-empty array of chemical symbols"
                                                          : "the cutoff radius, a number > 0") +
                                  ")");
  }

  ModelSpec spec;
  if (json.contains("architecture")) {
    const auto& value = json.at("architecture");
    if (!value.is_string() || value.get<std::string>().empty())
      reject("architecture", value, "a non-empty string naming a registered architecture");
    spec.architecture = value.get<std::string>();
  }
  spec.elements = parse_elements(json.at("elements"));
  {
    const auto& value = json.at("cutoff");
    // A json built in code (not parsed) can hold NaN or infinity; neither is a radius.
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0.0)
      reject("cutoff", value, "a finite number > 0, in the length unit of 'units'");
    spec.cutoff = value.get<double>();
  }
  if (json.contains("units")) {
    const auto& value = json.at("units");
    const auto& styles = supported_unit_styles();
    const bool known = value.is_string() && std::find(styles.begin(), styles.end(),
                                                      value.get<std::string>()) != styles.end();
    if (!known) {
      const bool is_lj = value.is_string() && value.get<std::string>() == "lj";
      reject("units", value,
             "a LAMMPS unit style: one of " + joined(styles) +
                 (is_lj ? "; 'lj' is refused: a model of real atoms has dimensions" : ""));
    }
    spec.units = value.get<std::string>();
  }
  if (json.contains("committee_size"))
    spec.committee_size =
        parse_integer("committee_size", json.at("committee_size"), 1, kMaxCommitteeSize,
                      "an integer from 1 to " + std::to_string(kMaxCommitteeSize));
  if (json.contains("dtype")) {
    const auto& value = json.at("dtype");
    if (!value.is_string() ||
        (value.get<std::string>() != "float32" && value.get<std::string>() != "float64"))
      reject("dtype", value, "\"float32\" or \"float64\"");
    spec.dtype = value.get<std::string>();
  }
  if (json.contains("seed")) {
    const auto& value = json.at("seed");
    if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0))
      reject("seed", value, "a non-negative integer");
    spec.seed = value.get<uint64_t>();
  }
  if (json.contains("hyperparameters")) {
    const auto& value = json.at("hyperparameters");
    if (!value.is_object())
      reject("hyperparameters", value, "a JSON object of the architecture's settings");
    spec.hyperparameters = value;
  }
  return spec;
}

nlohmann::json to_json(const ModelSpec& spec) {
  return nlohmann::json{{"architecture", spec.architecture},
                        {"elements", spec.elements},
                        {"cutoff", spec.cutoff},
                        {"units", spec.units},
                        {"committee_size", spec.committee_size},
                        {"dtype", spec.dtype},
                        {"seed", spec.seed},
                        {"hyperparameters", spec.hyperparameters}};
}

ModelSpec read_model_spec_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::invalid_argument("model spec: cannot read file '" + path + "'");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(file);
  } catch (const nlohmann::json::parse_error& error) {
    throw std::invalid_argument("model spec: file '" + path +
                                "' is not valid JSON: " + error.what());
  }
  try {
    return model_spec_from_json(json);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(std::string(error.what()) + " [in file '" + path + "']");
  }
}

nlohmann::json TrainingMetadata::to_json() const {
  return nlohmann::json{
      {"optimizer_steps", optimizer_steps}, {"frames_seen", frames_seen}, {"precision", precision}};
}

TrainingMetadata TrainingMetadata::from_json(const nlohmann::json& json) {
  if (!json.is_object())
    throw std::invalid_argument("training metadata: expected a JSON object, got " + shown(json));
  TrainingMetadata metadata;
  metadata.optimizer_steps = metadata_counter(json, "optimizer_steps");
  metadata.frames_seen = metadata_counter(json, "frames_seen");
  if (json.contains("precision")) {
    const auto& value = json.at("precision");
    if (!value.is_string())
      throw std::invalid_argument("training metadata: key 'precision' has value " + shown(value) +
                                  " (expected a string such as \"float32\", or \"\")");
    metadata.precision = value.get<std::string>();
  }
  return metadata;
}

}  // namespace otf

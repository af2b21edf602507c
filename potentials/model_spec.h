// What a model is, independent of its weights: architecture name, elements, cutoff, unit system,
// committee size, parameter dtype, seed, and the architecture's own hyperparameters. A spec is
// what a user writes (a small JSON file) to create a fresh untrained model, and what a model file
// carries in its header.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace otf {

struct ModelSpec {
  // Key of the potential registry (potential_registry.h), e.g. "behler-parrinello".
  std::string architecture = "behler-parrinello";
  // Chemical symbols; the model's species index of an element is its position here.
  std::vector<std::string> elements;
  // Distance beyond which atoms do not interact, in the length unit of `units`.
  double cutoff = 0.0;
  // A LAMMPS unit style name: the model's energies, lengths and forces are in this system.
  std::string units = "metal";
  // Number of committee members; their disagreement is the uncertainty.
  int64_t committee_size = 4;
  // Parameter dtype: "float32" or "float64" (mixed precision applies on top of float32).
  std::string dtype = "float32";
  // Seed of the weight initialisation; members differ through it.
  uint64_t seed = 1;
  // The architecture's own settings; defaults filled in by the architecture.
  nlohmann::json hyperparameters = nlohmann::json::object();

  int64_t num_species() const { return static_cast<int64_t>(elements.size()); }
  // The species index of `element`, or -1.
  int64_t species_index(const std::string& element) const;
};

// Unit styles LAMMPS knows; "lj" is refused (a model of real atoms has dimensions).
const std::vector<std::string>& supported_unit_styles();

// Reads and validates a spec: unknown keys and wrong types are errors naming the key, the value
// and what is expected (std::invalid_argument, prefixed "model spec: ").
ModelSpec model_spec_from_json(const nlohmann::json& json);
nlohmann::json to_json(const ModelSpec& spec);

// Reads a spec file (JSON); errors name the file.
ModelSpec read_model_spec_file(const std::string& path);

// Training history a model file carries, so a user can tell what a model has seen.
struct TrainingMetadata {
  int64_t optimizer_steps = 0;
  int64_t frames_seen = 0;
  std::string precision;  // last training precision ("float32", ...); empty when untrained
  nlohmann::json to_json() const;
  static TrainingMetadata from_json(const nlohmann::json& json);
};

}  // namespace otf

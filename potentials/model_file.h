// The model file: self-describing and versioned. A fixed preamble (magic, format version, section
// lengths, checksum), a JSON header (spec with every hyperparameter, unit system, training
// metadata) and the tensors (weights of all committee members, normalisation, energy shifts).
// Written atomically: a temporary file in the same folder, flushed, then renamed over the target.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "potential.h"

namespace otf {

constexpr uint32_t kModelFormatVersion = 1;

// Serialises the model (bitwise: load(save(m)) reproduces every tensor bit).
std::string save_model_to_bytes(const Potential& potential);
// Throws std::runtime_error naming the problem: not a model file, a newer format version,
// truncated, corrupt (checksum), an unknown architecture, a header/weights mismatch.
std::shared_ptr<Potential> load_model_from_bytes(const std::string& bytes);

// Atomic write; errors name the path.
void save_model(const Potential& potential, const std::string& path);
// Errors name the path and the problem.
std::shared_ptr<Potential> load_model(const std::string& path);

// A model file, or a JSON spec (the file starts with '{'): a fresh untrained model from it.
std::shared_ptr<Potential> load_model_or_spec(const std::string& path);

}  // namespace otf

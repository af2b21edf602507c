// Architectures by name: a model file or spec names its architecture, and the registry builds it.
// A second architecture registers a factory here; no caller changes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model_spec.h"
#include "potential.h"

namespace otf {

using PotentialFactory = std::function<std::shared_ptr<Potential>(const ModelSpec& spec)>;

// Adds or replaces a factory.
void register_potential(const std::string& architecture, PotentialFactory factory);
std::vector<std::string> registered_architectures();

// A fresh model with initial weights from spec.seed, its parameters in spec.dtype. Throws
// std::invalid_argument for an unknown architecture (listing the known ones) or a bad spec.
std::shared_ptr<Potential> create_potential(const ModelSpec& spec);

}  // namespace otf

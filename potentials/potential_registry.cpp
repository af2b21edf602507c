#include "potential_registry.h"

#include <map>
#include <mutex>
#include <stdexcept>

#include "bayesian_linear_potential.h"
#include "behler_parrinello_potential.h"

namespace otf {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, PotentialFactory> factories;
};

// Built-in architectures are registered here, not by static initialisers in their own files: a
// static library drops object files nobody references, and their registrations with them.
Registry& registry() {
  static Registry instance;
  static std::once_flag builtins;
  std::call_once(builtins, [] {
    instance.factories[BehlerParrinelloPotential::kArchitecture] = [](const ModelSpec& spec) {
      return std::make_shared<BehlerParrinelloPotential>(spec);
    };
    instance.factories[BayesianLinearPotential::kArchitecture] = [](const ModelSpec& spec) {
      return std::make_shared<BayesianLinearPotential>(spec);
    };
  });
  return instance;
}

}  // namespace

void register_potential(const std::string& architecture, PotentialFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[architecture] = std::move(factory);
}

std::vector<std::string> registered_architectures() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& entry : r.factories) names.push_back(entry.first);
  return names;
}

std::shared_ptr<Potential> create_potential(const ModelSpec& spec) {
  // A spec built in code gets the same checks as one read from JSON.
  const ModelSpec checked = model_spec_from_json(to_json(spec));
  PotentialFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto found = r.factories.find(checked.architecture);
    if (found == r.factories.end()) {
      std::string known;
      for (const auto& entry : r.factories) known += (known.empty() ? "" : ", ") + entry.first;
      throw std::invalid_argument("model spec: unknown architecture '" + checked.architecture +
                                  "' (known: " + known + ")");
    }
    factory = found->second;
  }
  return factory(checked);
}

}  // namespace otf

#include "pair_style_keywords.h"

#include <stdexcept>

#include "keywords.h"

namespace otf {
namespace {

constexpr const char* kSyntax =
    "pair_style otf <model file or spec.json> [precision <value>] [chunk <centres>] "
    "[resident yes|no (otf/kk only)]";

constexpr KeywordTable<ResidentEvaluation, 2> kResident{{
    {"yes", ResidentEvaluation::Yes},
    {"no", ResidentEvaluation::No},
}};

}  // namespace

PairStyleSettings parse_pair_style_keywords(const std::vector<std::string>& words,
                                            bool kokkos_variant) {
  if (words.empty()) throw std::invalid_argument(std::string("expected ") + kSyntax);
  PairStyleSettings settings;
  settings.model_path = words[0];
  for (std::size_t i = 1; i < words.size(); i += 2) {
    const std::string& keyword = words[i];
    if (keyword != "precision" && keyword != "chunk" && keyword != "resident")
      throw std::invalid_argument("unknown keyword '" + keyword +
                                  "' (expected one of: precision, chunk, resident)");
    if (i + 1 >= words.size())
      throw std::invalid_argument("keyword '" + keyword + "' needs a value (" + kSyntax + ")");
    const std::string& value = words[i + 1];
    if (keyword == "precision") {
      try {
        settings.precision = parse_precision(value);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("precision: ") + e.what());
      }
    } else if (keyword == "chunk") {
      settings.chunk_size = parse_integer_value("chunk", value);
      if (settings.chunk_size < 1 || settings.chunk_size > 1000000000)
        throw std::invalid_argument("chunk must be at least 1 centre atom and at most 1000000000 "
                                    "(got " + value + ")");
    } else {
      if (!kokkos_variant)
        throw std::invalid_argument("keyword 'resident' is for the Kokkos variant (pair_style "
                                    "otf/kk, or -sf kk) only");
      try {
        settings.resident = parse_keyword(kResident, value, "resident value", "yes or no");
      } catch (const std::invalid_argument&) {
        throw std::invalid_argument("resident must be 'yes' or 'no' (got '" + value + "')");
      }
    }
  }
  return settings;
}

std::vector<int> species_of_types(const std::vector<std::string>& element_per_type,
                                  const std::vector<std::string>& model_elements,
                                  const std::string& model_path, bool under_hybrid) {
  std::string elements;
  for (const auto& element : model_elements) elements += (elements.empty() ? "" : " ") + element;
  std::vector<int> species(element_per_type.size() + 1, -1);
  int mapped = 0;
  for (std::size_t type = 1; type <= element_per_type.size(); ++type) {
    const std::string& element = element_per_type[type - 1];
    if (element == "NULL") {
      if (!under_hybrid)
        throw std::invalid_argument(
            "atom type " + std::to_string(type) + " is NULL, but NULL is only for types left "
            "to another style under pair_style hybrid or hybrid/overlay; give every type one of "
            "the model's elements (" + elements + ")");
      continue;
    }
    for (std::size_t k = 0; k < model_elements.size(); ++k)
      if (model_elements[k] == element) species[type] = static_cast<int>(k);
    if (species[type] < 0)
      throw std::invalid_argument("element '" + element + "' (atom type " +
                                  std::to_string(type) + ") is not in the model '" + model_path +
                                  "', whose elements are: " + elements);
    ++mapped;
  }
  if (mapped == 0)
    throw std::invalid_argument("every atom type is NULL; map at least one type to an element "
                                "of the model");
  return species;
}

}  // namespace otf

// The grammar of pair_style otf's arguments (doc/pair_otf.md), read once, here: the model file
// (or spec) and the keywords precision, chunk and resident, into typed settings, and pair_coeff's
// elements per atom type. No LibTorch or
// LAMMPS types: the LAMMPS style hands over its words and reports the message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "precision.h"

namespace otf {

// Where pair_style otf/kk evaluates the model: as the execution space suggests (auto), always
// through device tensors (yes), or in place in host arrays (no).
enum class ResidentEvaluation { Auto, Yes, No };

struct PairStyleSettings {
  std::string model_path;
  Precision precision = Precision::Float32;
  int64_t chunk_size = 2048;  // centre atoms per evaluation chunk
  ResidentEvaluation resident = ResidentEvaluation::Auto;
};

// `words` are the style's arguments: the model, then keyword value pairs. `resident` is accepted
// by the Kokkos variant only. Throws std::invalid_argument with the message to show after
// "pair_style otf: ".
PairStyleSettings parse_pair_style_keywords(const std::vector<std::string>& words,
                                            bool kokkos_variant);

// pair_coeff * * <element or NULL per atom type>: the model's species index of each atom type
// (index 0 unused; -1 for NULL, which only a style under hybrid may leave to another style).
// Throws std::invalid_argument with the message to show after "pair_coeff for pair_style otf: ".
std::vector<int> species_of_types(const std::vector<std::string>& element_per_type,
                                  const std::vector<std::string>& model_elements,
                                  const std::string& model_path, bool under_hybrid);

}  // namespace otf

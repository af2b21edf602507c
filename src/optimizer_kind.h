// Which optimizer a training run uses (`optimizer adam|adamw|sgd`), apart from LibTorch so that the
// settings the LAMMPS styles hold can name it; optimizer_factory.h builds it.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace otf {

enum class OptimizerKind { Adam, AdamW, SGD };

// Accepts "adam", "adamw", "sgd" in any letter case with surrounding whitespace; throws
// std::invalid_argument naming the bad value and listing the accepted ones.
OptimizerKind parse_optimizer_kind(std::string_view text);
// The canonical lower-case name: parse_optimizer_kind(to_string(k)) == k.
std::string to_string(OptimizerKind kind);
std::ostream& operator<<(std::ostream& out, OptimizerKind kind);

}  // namespace otf

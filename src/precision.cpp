#include "precision_dtype.h"

#include "keywords.h"

#include <array>
#include <cctype>
#include <ostream>
#include <stdexcept>
#include <utility>

namespace otf {
namespace {

constexpr std::string_view kAcceptedSpellings =
    "accepted: float32, bfloat16, float16; aliases fp32, bf16, fp16; an optional 'torch.' "
    "prefix; any case";

// Canonical names first, then the aliases (docs/design.md §7.1).
constexpr KeywordTable<Precision, 6> kSpellings{{
    {"float32", Precision::Float32},
    {"bfloat16", Precision::BFloat16},
    {"float16", Precision::Float16},
    {"fp32", Precision::Float32},
    {"bf16", Precision::BFloat16},
    {"fp16", Precision::Float16},
}};

}  // namespace

Precision parse_precision(std::string_view text) {
  const std::string lowered = normalized_keyword(text);
  std::string_view name = lowered;
  constexpr std::string_view kTorchPrefix = "torch.";
  if (name.substr(0, kTorchPrefix.size()) == kTorchPrefix) name.remove_prefix(kTorchPrefix.size());
  for (const auto& entry : kSpellings)
    if (name == entry.spelling) return entry.value;
  throw std::invalid_argument("unknown precision '" + std::string(text) + "' (" +
                              std::string(kAcceptedSpellings) + ")");
}

Precision precision_from_dtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
      return Precision::Float32;
    case c10::ScalarType::BFloat16:
      return Precision::BFloat16;
    case c10::ScalarType::Half:
      return Precision::Float16;
    default:
      throw std::invalid_argument("unsupported precision dtype '" +
                                  std::string(c10::toString(dtype)) +
                                  "' (accepted: torch.float32, torch.bfloat16, torch.float16)");
  }
}

Precision precision_from_dtype(caffe2::TypeMeta dtype) {
  // TypeMeta::toScalarType() throws c10::Error for non-scalar metas (e.g. std::string); report
  // those the same way as an unsupported scalar type.
  if (!dtype.isScalarType()) {
    throw std::invalid_argument("unsupported precision dtype '" + std::string(dtype.name()) +
                                "' (accepted: torch.float32, torch.bfloat16, torch.float16)");
  }
  return precision_from_dtype(dtype.toScalarType());
}

std::string to_string(Precision precision) {
  return keyword_spelling(kSpellings, precision, "otf::Precision");
}

std::ostream& operator<<(std::ostream& out, Precision precision) {
  return out << to_string(precision);
}

c10::ScalarType to_scalar_type(Precision precision) {
  switch (precision) {
    case Precision::Float32:
      return c10::ScalarType::Float;
    case Precision::BFloat16:
      return c10::ScalarType::BFloat16;
    case Precision::Float16:
      return c10::ScalarType::Half;
  }
  throw std::invalid_argument("invalid otf::Precision value " +
                              std::to_string(static_cast<int>(precision)));
}

bool needs_grad_scaler(Precision precision) { return precision == Precision::Float16; }

}  // namespace otf

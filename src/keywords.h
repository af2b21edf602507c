// How user-facing words and numbers are read and echoed: every keyword parser of the project
// (precision, optimizer, schedule, loss kind, drive mode, the trainer's keywords) accepts the same
// spellings (surrounding blanks, any letter case), reads numbers with the same syntax rules and
// states a setting's range in the same words. No LibTorch, no LAMMPS: the LAMMPS styles use it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace otf {

// Surrounding whitespace removed, ASCII letters lower-cased: " BF16 " -> "bf16".
std::string normalized_keyword(std::string_view text);

// Shortest natural form of a number for messages ("0.001", "1e-08", "2").
std::string format_number(double value);

// One spelling of a closed set's member. A set's table lists the canonical spelling of each
// member first, then any aliases; lookups compare normalized_keyword(text) with the spellings, so
// every closed set follows the one case rule.
template <typename Enum>
struct KeywordSpelling {
  std::string_view spelling;
  Enum value;
};

template <typename Enum, std::size_t N>
using KeywordTable = std::array<KeywordSpelling<Enum>, N>;

// The member spelled `text`; throws std::invalid_argument "unknown <what> '<text>' (<accepted>)".
template <typename Enum, std::size_t N>
Enum parse_keyword(const KeywordTable<Enum, N>& table, std::string_view text, std::string_view what,
                   std::string_view accepted) {
  const std::string name = normalized_keyword(text);
  for (const auto& entry : table)
    if (name == entry.spelling) return entry.value;
  throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(text) + "' (" +
                              std::string(accepted) + ")");
}

// The canonical (first) spelling of `value`; throws std::invalid_argument for a value that is
// not in the table (a cast integer), naming the enum by `type_name`.
template <typename Enum, std::size_t N>
std::string keyword_spelling(const KeywordTable<Enum, N>& table, Enum value,
                             std::string_view type_name) {
  for (const auto& entry : table)
    if (entry.value == value) return std::string(entry.spelling);
  throw std::invalid_argument("invalid " + std::string(type_name) + " value " +
                              std::to_string(static_cast<int>(value)));
}

// ---- numbers in keyword values -----------------------------------------------------------------
// `name` is how the user knows the value ("every", "weights E", "thresholds <force_rmse>").

// An integer written as one ([+-]digits, at most 18 digits so that it cannot overflow).
// Throws std::invalid_argument: "<name>: Expected integer parameter instead of '<text>'" (the
// words of LAMMPS' own message), or "<name> must be an integer of at most 18 digits (got ...)".
int64_t parse_integer_value(std::string_view name, std::string_view text);
// A finite real number (decimal or exponent notation, as LAMMPS reads numbers; no inf, nan or
// hexadecimal). Throws std::invalid_argument: "<name>: Expected floating point parameter instead
// of '<text>'", or "<name> must be a finite number (got <text>)" when it overflows.
double parse_real_value(std::string_view name, std::string_view text);
// Whether `text` is written like a real number (what parse_real_value reads, overflow included):
// a list of numbers after a keyword ends at the first word that is not.
bool looks_like_number(std::string_view text);

// The range rules of settings, each stated once by the component that owns the setting, all in
// the same words: "<name> must be an integer in [low, high] (got value)" and "<name> must be a
// finite number in [low, high] (got value)" ("(low" with low_open). Throw std::invalid_argument.
void require_integer_in(std::string_view name, int64_t value, int64_t low, int64_t high);
void require_real_in(std::string_view name, double value, double low, double high,
                     bool low_open = false);

}  // namespace otf

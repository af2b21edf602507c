#include "keywords.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace otf {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [+-]? digits* [. digits*] ([eE] [+-]? digits+)?, with at least one mantissa digit: the numbers
// LAMMPS' utils::is_double accepts.
bool is_decimal_number(std::string_view text) {
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t mantissa_digits = 0;
  while (i < text.size() && is_digit(text[i])) ++i, ++mantissa_digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i, ++mantissa_digits;
  }
  if (mantissa_digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    std::size_t exponent_digits = 0;
    while (i < text.size() && is_digit(text[i])) ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == text.size();
}

}  // namespace

std::string normalized_keyword(std::string_view text) {
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  std::string lowered(text);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lowered;
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

int64_t parse_integer_value(std::string_view name, std::string_view text) {
  std::size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  const std::size_t digits = text.size() - i;
  bool integer = digits > 0;
  for (std::size_t k = i; k < text.size(); ++k) integer = integer && is_digit(text[k]);
  if (!integer)
    throw std::invalid_argument(std::string(name) + ": Expected integer parameter instead of '" +
                                std::string(text) + "'");
  if (digits > 18)
    throw std::invalid_argument(std::string(name) + " must be an integer of at most 18 digits (got " +
                                std::string(text) + ")");
  return std::strtoll(std::string(text).c_str(), nullptr, 10);
}

bool looks_like_number(std::string_view text) { return is_decimal_number(text); }

double parse_real_value(std::string_view name, std::string_view text) {
  if (!is_decimal_number(text))
    throw std::invalid_argument(std::string(name) +
                                ": Expected floating point parameter instead of '" +
                                std::string(text) + "'");
  const double value = std::strtod(std::string(text).c_str(), nullptr);
  if (!std::isfinite(value))
    throw std::invalid_argument(std::string(name) + " must be a finite number (got " +
                                std::string(text) + ")");
  return value;
}

void require_integer_in(std::string_view name, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high)
    throw std::invalid_argument(std::string(name) + " must be an integer in [" +
                                std::to_string(low) + ", " + std::to_string(high) + "] (got " +
                                std::to_string(value) + ")");
}

void require_real_in(std::string_view name, double value, double low, double high,
                     bool low_open) {
  const bool above = low_open ? value > low : value >= low;
  if (!std::isfinite(value) || !above || value > high)
    throw std::invalid_argument(std::string(name) + " must be a finite number in " +
                                (low_open ? "(" : "[") + format_number(low) + ", " +
                                format_number(high) + "] (got " + format_number(value) + ")");
}

}  // namespace otf

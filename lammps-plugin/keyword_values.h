/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: keyword values of the plugin's styles, range-checked the same
   way everywhere: integers without wrap-around (LAMMPS 29Sep2021's
   utils::inumeric wraps 99999999999 to 1215752191), finite real numbers
   (utils::numeric accepts 1e999 as inf), each error naming the style, the
   keyword, the accepted range and the value given. Out-of-range numbers
   are caught before LAMMPS reads them: newer releases stop on them with
   their own message, which names neither the style nor the keyword.
------------------------------------------------------------------------- */

#ifndef LMP_OTF_KEYWORD_VALUES_H
#define LMP_OTF_KEYWORD_VALUES_H

#include "error.h"
#include "lammps.h"
#include "utils.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace LAMMPS_NS {
namespace otf_keywords {

// An integer in [low, high]. Not an integer at all: LAMMPS' own "Expected integer" error.
inline long long integer_value(LAMMPS *lmp, const char *style, const std::string &keyword,
                               const char *text, long long low, long long high)
{
  // More than 18 digits cannot be read without overflow; nothing here needs that many.
  size_t digits = 0;
  for (const char *c = text; *c; ++c) digits += (*c >= '0' && *c <= '9') ? 1 : 0;
  const bool too_long = utils::is_integer(text) && digits > 18;
  const long long value = too_long ? 0 : utils::bnumeric(FLERR, text, false, lmp);
  if (too_long || value < low || value > high)
    lmp->error->all(FLERR, "{}: {} must be an integer in [{}, {}] (got {})", style, keyword, low,
                    high, text);
  return value;
}

// A finite real number in [low, high] (or (low, high] with low_open).
inline double real_value(LAMMPS *lmp, const char *style, const std::string &keyword,
                         const char *text, double low, double high, bool low_open = false)
{
  const bool overflows = utils::is_double(text) && !std::isfinite(std::strtod(text, nullptr));
  const double value = overflows ? HUGE_VAL : utils::numeric(FLERR, text, false, lmp);
  const bool above = low_open ? value > low : value >= low;
  if (!std::isfinite(value) || !above || value > high)
    lmp->error->all(FLERR, "{}: {} must be a finite number in {}{}, {}] (got {})", style, keyword,
                    low_open ? "(" : "[", low, high, text);
  return value;
}

// A non-empty word (an empty one usually comes from an unset variable).
inline std::string word_value(LAMMPS *lmp, const char *style, const std::string &keyword,
                              const char *text)
{
  if (text == nullptr || *text == '\0')
    lmp->error->all(FLERR, "{}: {} needs a non-empty value (got \"\"; an unset variable?)", style,
                    keyword);
  return text;
}

}    // namespace otf_keywords
}    // namespace LAMMPS_NS

#endif

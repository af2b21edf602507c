// How user-facing words and numbers are read and echoed: every keyword parser of the engine
// (precision, optimizer, schedule, loss kind) accepts the same spellings (surrounding blanks, any
// letter case) and formats numbers in its messages the same way.
#pragma once

#include <string>
#include <string_view>

namespace otf {

// Surrounding whitespace removed, ASCII letters lower-cased: " BF16 " -> "bf16".
std::string normalized_keyword(std::string_view text);

// Shortest natural form of a number for messages ("0.001", "1e-08", "2").
std::string format_number(double value);

}  // namespace otf

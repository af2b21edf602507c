// The grammar of fix otf/train's keywords, read once, here: the fix hands over its words (after it
// has split off `reference "<pair style>" coeff "..."`) and what only the MD side knows (the fix
// ID, the unit style, the kind of reference); out come typed settings with the product's defaults
// applied (drive auto, the default accuracy of the unit style, the label journal of an ab initio
// reference), every rule checked by the component that owns it. No LibTorch or LAMMPS types
// (doc/fix_otf_train.md is the user's page; docs/design.md §9.6 the design).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ipi_reference.h"
#include "on_the_fly_trainer.h"

namespace otf {

enum class ReferenceKind { PairStyle, Ipi };

struct TrainerKeywordContext {
  std::string fix_id;              // names the default label journal of reference ipi
  std::string unit_style = "metal";
  ReferenceKind reference = ReferenceKind::PairStyle;
  std::string reference_style;     // the reference pair style's words, for messages
};

struct TrainerKeywordSettings {
  TrainerSettings trainer;
  std::optional<IpiReferenceSettings> ipi;  // reference ipi only
};

// A keyword, a value or a combination of them is wrong; the message names it and says what is
// accepted.
class KeywordError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Reads the keywords. With ReferenceKind::Ipi the words start with the address: unix <name> |
// inet [<host>:]<port>. Throws KeywordError.
TrainerKeywordSettings parse_trainer_keywords(const std::vector<std::string>& words,
                                              const TrainerKeywordContext& context);

// The keywords in the order of the table: "precision, every, ...".
std::string trainer_keyword_list();

}  // namespace otf

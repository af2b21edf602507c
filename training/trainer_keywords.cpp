#include "trainer_keywords.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstddef>
#include <string_view>
#include <utility>

#include "atomic_units.h"
#include "keywords.h"

namespace otf {
namespace {

// The words after one keyword, read in order; every read names the keyword (or the value).
class KeywordValues {
 public:
  KeywordValues(const std::vector<std::string>& words, std::size_t next)
      : words_(words), next_(next) {}

  const std::string& word(std::string_view name) {
    const std::string& text = words_[next_++];
    // An empty value usually comes from an unset variable; it is an error, not "nothing".
    if (text.empty())
      throw KeywordError(std::string(name) +
                         " needs a non-empty value (got \"\"; an unset variable?)");
    return text;
  }
  const std::string& any_word() { return words_[next_++]; }
  int64_t integer(std::string_view name) { return parse_integer_value(name, words_[next_++]); }
  double real(std::string_view name) { return parse_real_value(name, words_[next_++]); }
  // The next word, if there is one (optional values).
  const std::string* peek() const { return next_ < words_.size() ? &words_[next_] : nullptr; }
  void skip() { ++next_; }
  std::size_t next() const { return next_; }

 private:
  const std::vector<std::string>& words_;
  std::size_t next_;
};

// What the parse collects beyond the settings themselves.
struct ParseState {
  TrainerKeywordSettings out;
  bool drive_given = false;
  bool journal_given = false;
};

struct Keyword {
  std::string_view name;
  std::size_t values;  // at least this many words follow
  bool ipi_only;       // belongs to reference ipi
  void (*apply)(KeywordValues& values, ParseState& state);
};

constexpr KeywordTable<bool, 2> kYesNo{{
    {"yes", true},
    {"no", false},
}};

enum class BudgetAction { Stop, Skip };
constexpr KeywordTable<BudgetAction, 2> kBudgetActions{{
    {"stop", BudgetAction::Stop},
    {"skip", BudgetAction::Skip},
}};

constexpr KeywordTable<IpiAddress::Kind, 2> kAddressKinds{{
    {"unix", IpiAddress::Kind::Unix},
    {"inet", IpiAddress::Kind::Inet},
}};

TrainingSessionSettings& session(ParseState& s) { return s.out.trainer.session; }
PolicySettings& policy(ParseState& s) { return s.out.trainer.policy; }
IpiReferenceSettings& ipi(ParseState& s) { return *s.out.ipi; }

// One table of the keywords (doc/fix_otf_train.md documents them in this order; a unit test
// compares). Ranges are not
// checked here: each owner checks its settings once the words are read.
const std::array<Keyword, 44> kKeywords{{
    {"precision", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).precision = parse_precision(v.any_word()); }},
    {"every", 1, false,
     [](KeywordValues& v, ParseState& s) { policy(s).label_every = v.integer("every"); }},
    {"steps_per_frame", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).steps_per_frame = v.integer("steps_per_frame");
     }},
    {"batch", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).batch_frames = v.integer("batch"); }},
    {"lr", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).learning_rate = v.real("lr"); }},
    {"optimizer", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).optimizer = parse_optimizer_kind(v.any_word());
     }},
    {"weights", 3, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).energy_weight = v.real("weights E");
       session(s).force_weight = v.real("weights F");
       session(s).stress_weight = v.real("weights S");
     }},
    {"buffer", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).buffer_frames = v.integer("buffer"); }},
    {"validation", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).validation_fraction = v.real("validation");
     }},
    {"seed", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).seed = static_cast<uint64_t>(v.integer("seed"));
     }},
    {"clip", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).clip_max_norm = v.real("clip"); }},
    {"scale_init", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).grad_scaler.init_scale = v.real("scale_init");
     }},
    {"scale_growth", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).grad_scaler.growth_factor = v.real("scale_growth");
     }},
    {"scale_backoff", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).grad_scaler.backoff_factor = v.real("scale_backoff");
     }},
    {"scale_interval", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).grad_scaler.growth_interval = v.integer("scale_interval");
     }},
    {"save", 1, false,
     [](KeywordValues& v, ParseState& s) { s.out.trainer.save_path = v.word("save"); }},
    {"save_every", 1, false,
     [](KeywordValues& v, ParseState& s) { s.out.trainer.save_every = v.integer("save_every"); }},
    {"stats_frames", 1, false,
     [](KeywordValues& v, ParseState& s) {
       session(s).stats_frames = v.integer("stats_frames");
     }},
    {"drive", 1, false,
     [](KeywordValues& v, ParseState& s) {
       policy(s).mode = parse_drive_mode(v.any_word());
       s.drive_given = true;
     }},
    {"accuracy", 2, false,
     [](KeywordValues& v, ParseState& s) {
       policy(s).target_force_error = v.real("accuracy <force>");
       policy(s).target_energy_error = v.real("accuracy <energy>");
     }},
    {"min_labels", 1, false,
     [](KeywordValues& v, ParseState& s) { policy(s).min_labels = v.integer("min_labels"); }},
    {"take_over", 1, false,
     [](KeywordValues& v, ParseState& s) { policy(s).take_over_factor = v.real("take_over"); }},
    {"label_steps", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.label_steps = v.integer("label_steps");
     }},
    {"calibration_window", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.calibration_window = v.integer("calibration_window");
     }},
    {"thresholds", 3, false,
     [](KeywordValues& v, ParseState& s) {
       policy(s).hand_over_force_rmse = v.real("thresholds <force_rmse>");
       policy(s).label_uncertainty = v.real("thresholds <uncertainty>");
       policy(s).take_over_uncertainty = v.real("thresholds <take_over>");
     }},
    {"check_every", 1, false,
     [](KeywordValues& v, ParseState& s) { policy(s).check_every = v.integer("check_every"); }},
    {"lr_schedule", 1, false,
     [](KeywordValues& v, ParseState& s) {
       // The kind, then its numbers: every following word written as a number.
       session(s).lr_schedule = parse_lr_schedule_kind(v.any_word());
       std::vector<double> numbers;
       while (v.peek() && looks_like_number(*v.peek())) numbers.push_back(v.real("lr_schedule"));
       session(s).lr_schedule_settings =
           lr_schedule_settings_from_values(session(s).lr_schedule, numbers);
     }},
    {"accumulate", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).accumulate = v.integer("accumulate"); }},
    {"ema", 1, false,
     [](KeywordValues& v, ParseState& s) { session(s).ema_decay = v.real("ema"); }},
    {"max_skips", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.max_skipped_in_row = v.integer("max_skips");
     }},
    {"outlier_factor", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.outlier_factor = v.real("outlier_factor");
     }},
    {"outlier_energy", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.outlier_energy = v.real("outlier_energy");
     }},
    {"reference_delay", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.reference_delay = v.real("reference_delay");
     }},
    {"label_wait", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.label_wait = parse_keyword(kYesNo, v.word("label_wait"), "label_wait value",
                                                "yes or no");
     }},
    {"journal", 1, false,
     [](KeywordValues& v, ParseState& s) {
       // journal none: no journal (an empty value is an error, not "none").
       const std::string& path = v.word("journal");
       s.out.trainer.journal_path = normalized_keyword(path) == "none" ? std::string() : path;
       s.journal_given = true;
     }},
    {"warm_start", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.warm_start_paths.push_back(v.word("warm_start"));
     }},
    {"max_calls", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.max_reference_calls = v.integer("max_calls");
       // Optional action: stop (the default) ends the run, skip only stops labelling.
       const std::string* action = v.peek();
       if (!action) return;
       const std::string word = normalized_keyword(*action);
       if (word != "stop" && word != "skip") return;
       v.skip();
       s.out.trainer.budget_stops_run =
           parse_keyword(kBudgetActions, word, "max_calls action", "stop or skip") ==
           BudgetAction::Stop;
     }},
    {"learning_log", 1, false,
     [](KeywordValues& v, ParseState& s) {
       s.out.trainer.learning_log_path = v.word("learning_log");
     }},
    {"client", 1, true,
     [](KeywordValues& v, ParseState& s) { ipi(s).client_command = v.word("client"); }},
    {"client_log", 1, true,
     [](KeywordValues& v, ParseState& s) { ipi(s).client_log = v.word("client_log"); }},
    {"not_converged", 1, true,
     [](KeywordValues& v, ParseState& s) {
       ipi(s).not_converged_text = v.word("not_converged");
     }},
    {"connect_timeout", 1, true,
     [](KeywordValues& v, ParseState& s) {
       ipi(s).connect_timeout = v.real("connect_timeout");
     }},
    {"timeout", 1, true,
     [](KeywordValues& v, ParseState& s) { ipi(s).call_timeout = v.real("timeout"); }},
    {"retries", 1, true,
     [](KeywordValues& v, ParseState& s) {
       ipi(s).retries = static_cast<int>(
           std::max<int64_t>(std::min<int64_t>(v.integer("retries"), INT32_MAX), INT32_MIN));
     }},
}};

// reference ipi unix <name> | inet [<host>:]<port>
IpiAddress parse_ipi_address(const std::string& kind, const std::string& where) {
  IpiAddress address;
  address.kind = parse_keyword(kAddressKinds, kind, "i-PI address kind",
                               "reference ipi takes unix <name> or inet [<host>:]<port>");
  if (address.kind == IpiAddress::Kind::Unix) {
    // The clients' convention: name NAME is the socket file /tmp/ipi_NAME.
    if (where.empty() || where.find('/') != std::string::npos)
      throw KeywordError("reference ipi unix needs a socket name without '/' (the clients' "
                         "convention: name NAME is the file /tmp/ipi_NAME), got '" + where + "'");
    address.name = where;
    return address;
  }
  const auto colon = where.rfind(':');
  address.name = colon == std::string::npos ? "127.0.0.1" : where.substr(0, colon);
  if (address.name.empty()) throw KeywordError("reference ipi inet: empty host in '" + where + "'");
  const std::string port = colon == std::string::npos ? where : where.substr(colon + 1);
  const int64_t number = parse_integer_value("reference ipi inet <port>", port);
  require_integer_in("reference ipi inet <port>", number, 0, 65535);
  address.port = static_cast<int>(number);
  return address;
}

template <typename Body> void as_keyword_error(Body&& body) {
  try {
    body();
  } catch (const KeywordError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw KeywordError(e.what());
  }
}

}  // namespace

std::string trainer_keyword_list() {
  std::string list;
  for (const Keyword& keyword : kKeywords)
    list += (list.empty() ? "" : ", ") + std::string(keyword.name);
  return list;
}

TrainerKeywordSettings parse_trainer_keywords(const std::vector<std::string>& words,
                                              const TrainerKeywordContext& context) {
  ParseState state;
  std::size_t next = 0;
  if (context.reference == ReferenceKind::Ipi) {
    if (words.size() < 2)
      throw KeywordError("reference ipi takes unix <name> or inet [<host>:]<port>");
    state.out.ipi.emplace();
    as_keyword_error([&] { state.out.ipi->address = parse_ipi_address(words[0], words[1]); });
    next = 2;
  }
  while (next < words.size()) {
    const std::string& name = words[next];
    const Keyword* keyword = nullptr;
    for (const Keyword& candidate : kKeywords)
      if (candidate.name == name) keyword = &candidate;
    if (!keyword)
      throw KeywordError("unknown keyword '" + name + "' (expected one of: " +
                         trainer_keyword_list() + ")");
    if (next + keyword->values >= words.size())
      throw KeywordError("keyword '" + name + "' needs " + std::to_string(keyword->values) +
                         " value(s)");
    if (keyword->ipi_only && !state.out.ipi)
      throw KeywordError("keyword '" + name + "' belongs to reference ipi (the reference here is "
                         "pair_style " + context.reference_style + ")");
    KeywordValues values(words, next + 1);
    as_keyword_error([&] { keyword->apply(values, state); });
    next = values.next();
  }

  // The product's defaults: the safe policy (the reference drives until the model meets the
  // accuracy of the unit style), and every label of an ab initio code journalled.
  TrainerSettings& trainer = state.out.trainer;
  trainer.unit_style = context.unit_style;
  if (!state.drive_given) trainer.policy.mode = DriveMode::Auto;
  as_keyword_error([&] {
    const PolicySettings& p = trainer.policy;
    const bool criterion_given = p.by_accuracy() || p.hand_over_force_rmse != 0.0 ||
                                 p.label_uncertainty != 0.0 || p.take_over_uncertainty != 0.0;
    if (p.mode == DriveMode::Auto && !criterion_given)
      set_default_accuracy(trainer.policy, context.unit_style);
    check_trainer_settings(trainer);
  });
  if (state.out.ipi) {
    IpiReferenceSettings& settings = *state.out.ipi;
    try {
      settings.units = atomic_unit_conversion(context.unit_style);
    } catch (const std::invalid_argument& e) {
      throw KeywordError(std::string("reference ipi: ") + e.what());
    }
    as_keyword_error([&] { check_ipi_reference_settings(settings); });
    // Labels from an ab initio code are expensive: journalled unless the input says journal none.
    if (!state.journal_given) trainer.journal_path = "labels-" + context.fix_id + ".extxyz";
  }
  return std::move(state.out);
}

}  // namespace otf

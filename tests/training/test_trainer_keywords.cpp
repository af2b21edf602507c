// fix otf/train's keyword grammar without LAMMPS (training/trainer_keywords.h): every keyword read
// into its typed setting, a bad value of each named in the error, the product's defaults, the i-PI
// part, one case rule for every closed set, and the named outputs against the doc page.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "trainer_keywords.h"
#include "trainer_outputs.h"

namespace otf {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

TrainerKeywordContext pair_context() {
  TrainerKeywordContext context;
  context.fix_id = "learn";
  context.unit_style = "metal";
  context.reference_style = "lj/cut 8.5";
  return context;
}

TrainerKeywordContext ipi_context() {
  TrainerKeywordContext context = pair_context();
  context.reference = ReferenceKind::Ipi;
  return context;
}

TrainerKeywordSettings parse(const std::string& line,
                             const TrainerKeywordContext& context = pair_context()) {
  return parse_trainer_keywords(split(line), context);
}

std::string error_of(const std::vector<std::string>& words,
                     const TrainerKeywordContext& context = pair_context()) {
  try {
    parse_trainer_keywords(words, context);
  } catch (const KeywordError& error) {
    return error.what();
  }
  return "(accepted)";
}

std::string error_of(const std::string& line, const TrainerKeywordContext& context = pair_context()) {
  return error_of(split(line), context);
}

#define EXPECT_ERROR(line, fragment)                                            \
  do {                                                                          \
    const std::string message = error_of(line);                                 \
    EXPECT_NE(message.find(fragment), std::string::npos) << (line) << ": " << message; \
  } while (false)

struct GoodKeyword {
  std::string line;
  std::function<bool(const TrainerSettings&)> holds;
};

TEST(TrainerKeywords, EveryKeywordSetsItsSetting) {
  const std::vector<GoodKeyword> cases = {
      {"precision bf16", [](auto& t) { return t.session.precision == Precision::BFloat16; }},
      {"every 7", [](auto& t) { return t.policy.label_every == 7; }},
      {"steps_per_frame 3", [](auto& t) { return t.session.steps_per_frame == 3; }},
      {"batch 6", [](auto& t) { return t.session.batch_frames == 6; }},
      {"lr 2e-4", [](auto& t) { return t.session.learning_rate == 2e-4; }},
      {"optimizer sgd", [](auto& t) { return t.session.optimizer == OptimizerKind::SGD; }},
      {"weights 1 5 0.5",
       [](auto& t) {
         return t.session.energy_weight == 1 && t.session.force_weight == 5 &&
                t.session.stress_weight == 0.5;
       }},
      {"buffer 50", [](auto& t) { return t.session.buffer_frames == 50; }},
      {"validation 0.2", [](auto& t) { return t.session.validation_fraction == 0.2; }},
      {"seed 99", [](auto& t) { return t.session.seed == 99u; }},
      {"clip 5", [](auto& t) { return t.session.clip_max_norm == 5.0; }},
      {"scale_init 1024", [](auto& t) { return t.session.grad_scaler.init_scale == 1024.0; }},
      {"scale_growth 4", [](auto& t) { return t.session.grad_scaler.growth_factor == 4.0; }},
      {"scale_backoff 0.25", [](auto& t) { return t.session.grad_scaler.backoff_factor == 0.25; }},
      {"scale_interval 10", [](auto& t) { return t.session.grad_scaler.growth_interval == 10; }},
      {"save model.otf", [](auto& t) { return t.save_path == "model.otf"; }},
      {"save m.otf save_every 100", [](auto& t) { return t.save_every == 100; }},
      {"stats_frames 8", [](auto& t) { return t.session.stats_frames == 8; }},
      {"drive model", [](auto& t) { return t.policy.mode == DriveMode::Model; }},
      {"accuracy 0.1 0.004",
       [](auto& t) {
         return t.policy.target_force_error == 0.1 && t.policy.target_energy_error == 0.004 &&
                t.policy.default_accuracy_units.empty();
       }},
      {"thresholds 0.1 0.2 0.3",
       [](auto& t) {
         return t.policy.hand_over_force_rmse == 0.1 && t.policy.label_uncertainty == 0.2 &&
                t.policy.take_over_uncertainty == 0.3 && !t.policy.by_accuracy();
       }},
      {"check_every 4", [](auto& t) { return t.policy.check_every == 4; }},
      {"min_labels 3", [](auto& t) { return t.policy.min_labels == 3; }},
      {"take_over 6", [](auto& t) { return t.policy.take_over_factor == 6.0; }},
      {"label_steps 0", [](auto& t) { return t.label_steps == 0; }},
      {"calibration_window 12", [](auto& t) { return t.calibration_window == 12; }},
      {"lr_schedule step 100 0.5",
       [](auto& t) {
         return t.session.lr_schedule == LRScheduleKind::Step &&
                t.session.lr_schedule_settings.step_size == 100 &&
                t.session.lr_schedule_settings.gamma == 0.5;
       }},
      {"lr_schedule plateau 0.5 2 1e-6 every 3",
       [](auto& t) {
         return t.session.lr_schedule == LRScheduleKind::Plateau &&
                t.session.lr_schedule_settings.plateau->patience == 2 &&
                t.session.lr_schedule_settings.plateau->min_lr == 1e-6 && t.policy.label_every == 3;
       }},
      {"accumulate 2", [](auto& t) { return t.session.accumulate == 2; }},
      {"ema 0.99", [](auto& t) { return t.session.ema_decay == 0.99; }},
      {"max_skips 0", [](auto& t) { return t.max_skipped_in_row == 0; }},
      {"outlier_factor 0", [](auto& t) { return t.outlier_factor == 0.0; }},
      {"outlier_energy 0.5", [](auto& t) { return t.outlier_energy == 0.5; }},
      {"outlier_energy 0", [](auto& t) { return t.outlier_energy == 0.0; }},
      {"journal labels.extxyz", [](auto& t) { return t.journal_path == "labels.extxyz"; }},
      {"journal NONE", [](auto& t) { return t.journal_path.empty(); }},
      {"warm_start a.extxyz warm_start b.extxyz",
       [](auto& t) { return t.warm_start_paths == std::vector<std::string>{"a.extxyz", "b.extxyz"}; }},
      {"max_calls 30", [](auto& t) { return t.max_reference_calls == 30 && t.budget_stops_run; }},
      {"max_calls 30 SKIP every 2",
       [](auto& t) { return !t.budget_stops_run && t.policy.label_every == 2; }},
      {"learning_log curve.csv", [](auto& t) { return t.learning_log_path == "curve.csv"; }},
      {"label_wait no", [](auto& t) { return !t.label_wait; }},
      {"label_wait YES", [](auto& t) { return t.label_wait; }},
  };
  for (const GoodKeyword& c : cases) {
    TrainerKeywordSettings parsed;
    ASSERT_NO_THROW(parsed = parse(c.line)) << c.line << ": " << error_of(c.line);
    EXPECT_TRUE(c.holds(parsed.trainer)) << c.line;
    EXPECT_FALSE(parsed.ipi.has_value());
  }
}

TEST(TrainerKeywords, EveryKeywordRejectsABadValueNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"precision fp64", "unknown precision 'fp64'"},
      {"every 0", "every must be an integer in [1, "},
      {"every 1.5", "every: Expected integer"},
      {"every 123456789012345678901", "every must be an integer"},
      {"steps_per_frame -1", "steps_per_frame must be an integer in [0, "},
      {"batch 0", "batch must be an integer in [1, "},
      {"lr -1", "lr must be a finite number in [0, "},
      {"lr 1e999", "lr must be a finite number (got 1e999)"},
      {"lr fast", "lr: Expected floating point"},
      {"optimizer lbfgs", "unknown optimizer 'lbfgs'"},
      {"weights -1 1 0", "weights E must be a finite number in [0, "},
      {"weights 0 0 0", "weights E F S must be >= 0 and not all 0"},
      {"weights 1 1e400 0", "weights F must be a finite number"},
      {"buffer 0", "capacity_frames must be >= 1"},
      {"validation 0.9", "validation_fraction must be in [0, 0.5]"},
      {"seed -5", "seed must be an integer in [0, "},
      {"seed 4294967297", "seed must be an integer in [0, "},
      {"clip -1", "clip must be a finite number in [0, "},
      {"scale_init 0", "init_scale must be finite and > 0"},
      {"scale_growth 1", "The growth factor must be > 1.0."},
      {"scale_backoff 1.5", "The backoff factor must be < 1.0."},
      {"scale_backoff 0", "backoff_factor must be in (0, 1)"},
      {"scale_interval 0", "growth_interval must be >= 1"},
      {"save_every -1", "save_every must be an integer in [0, "},
      {"save_every 10", "save_every needs a file"},
      {"stats_frames -1", "stats_frames must be an integer in [0, "},
      {"drive both", "unknown drive 'both' (expected reference, model or auto)"},
      {"accuracy 0.05 0", "accuracy <energy> must be a finite number in (0, "},
      {"accuracy 1e999 0.002", "accuracy <force> must be a finite number"},
      {"thresholds 0 1 2", "thresholds <force_rmse> must be a finite number in (0, "},
      {"thresholds 0.1 0.5 0.2", "uncertainty <= take_over"},
      {"accuracy 0.05 0.002 thresholds 0.1 0.2 0.3", "either accuracy or thresholds"},
      {"drive model thresholds 0.1 0.2 0.3", "apply to drive auto only"},
      {"drive reference check_every 5", "apply to drive auto only"},
      {"check_every 0", "check_every must be an integer in [1, "},
      {"min_labels 0", "min_labels must be an integer in [1, "},
      {"take_over 2", "take_over must be a finite number in (2, "},
      {"label_steps -2", "label_steps must be an integer in [0, "},
      {"calibration_window 0", "calibration_window must be an integer in [1, "},
      {"lr_schedule linear 100", "none, step, exponential, cosine, plateau"},
      {"lr_schedule step 100", "step needs <steps> <gamma>"},
      {"lr_schedule cosine 2.5", "whole number"},
      {"lr_schedule exponential 1e999", "lr_schedule must be a finite number"},
      {"lr_schedule plateau 1.5 2", "lr_schedule plateau"},
      {"accumulate 0", "accumulate must be an integer in [1, "},
      {"ema 1", "decay must be in [0, 1)"},
      {"max_skips -1", "max_skips must be an integer in [0, "},
      {"outlier_factor -3", "outlier_factor must be a finite number in [0, "},
      {"outlier_factor 1", "outlier_factor must be 0 (off) or at least 2"},
      {"outlier_energy -1", "outlier_energy must be a finite number in [0, "},
      {"max_calls -1", "max_calls must be an integer in [0, "},
      {"label_wait maybe", "unknown label_wait value 'maybe' (yes or no)"},
      {"drive model label_wait no", "label_wait no applies to drive auto only"},
      {"speed 3", "unknown keyword 'speed' (expected one of: precision, every, "},
      {"lr", "keyword 'lr' needs 1 value(s)"},
      {"weights 1 2", "keyword 'weights' needs 3 value(s)"},
      {"client cp2k", "keyword 'client' belongs to reference ipi (the reference here is "
                      "pair_style lj/cut 8.5)"},
  };
  for (const auto& [line, fragment] : cases) EXPECT_ERROR(line, fragment);
  // Empty words come from unset variables: an error naming the keyword, not "no value".
  for (const char* keyword : {"save", "journal", "warm_start", "learning_log"})
    EXPECT_NE(error_of(std::vector<std::string>{keyword, ""}).find(std::string(keyword) +
                                                                  " needs a non-empty value"),
              std::string::npos)
        << keyword;
  EXPECT_NE(error_of(std::vector<std::string>{"precision", ""}).find("unknown precision ''"),
            std::string::npos);
}

TEST(TrainerKeywords, TheProductDefaultsAreDriveAutoWithTheUnitStylesAccuracy) {
  const TrainerSettings metal = parse("").trainer;
  EXPECT_EQ(metal.policy.mode, DriveMode::Auto);
  EXPECT_DOUBLE_EQ(metal.policy.target_force_error, 0.05);
  EXPECT_DOUBLE_EQ(metal.policy.target_energy_error, 0.002);
  EXPECT_EQ(metal.policy.default_accuracy_units, "metal");
  EXPECT_TRUE(metal.journal_path.empty()) << "a pair-style reference is not journalled";
  EXPECT_EQ(metal.unit_style, "metal");
  EXPECT_EQ(parse("drive auto").trainer.policy.default_accuracy_units, "metal");
  // A named criterion or a fixed mode takes no default accuracy.
  EXPECT_FALSE(parse("drive auto thresholds 0.1 0.2 0.3").trainer.policy.by_accuracy());
  EXPECT_FALSE(parse("drive reference").trainer.policy.by_accuracy());

  TrainerKeywordContext real = pair_context();
  real.unit_style = "real";
  EXPECT_NEAR(parse("", real).trainer.policy.target_force_error, 0.05 * 23.0605, 1e-3);
  TrainerKeywordContext lj = pair_context();
  lj.unit_style = "lj";
  EXPECT_NE(error_of("", lj).find("units lj have no physical scale"), std::string::npos);
  EXPECT_NO_THROW(parse("drive model", lj));
}

TEST(TrainerKeywords, ReferenceIpiReadsItsAddressItsKeywordsAndJournalsByDefault) {
  const TrainerKeywordSettings unix_socket =
      parse("unix si client cp2k.psmp client_log cp2k.out not_converged SCF connect_timeout 60 "
            "timeout 600 retries 4",
            ipi_context());
  ASSERT_TRUE(unix_socket.ipi.has_value());
  const IpiReferenceSettings& ipi = *unix_socket.ipi;
  EXPECT_EQ(ipi.address.kind, IpiAddress::Kind::Unix);
  EXPECT_EQ(ipi.address.name, "si");
  EXPECT_EQ(ipi.client_command, "cp2k.psmp");
  EXPECT_EQ(ipi.client_log, "cp2k.out");
  EXPECT_EQ(ipi.not_converged_text, "SCF");
  EXPECT_EQ(ipi.connect_timeout, 60.0);
  EXPECT_EQ(ipi.call_timeout, 600.0);
  EXPECT_EQ(ipi.retries, 4);
  EXPECT_EQ(unix_socket.trainer.journal_path, "labels-learn.extxyz");
  EXPECT_GT(ipi.units.hartree_per_energy, 0.0);
  EXPECT_TRUE(parse("unix si journal none", ipi_context()).trainer.journal_path.empty());

  const TrainerKeywordSettings inet = parse("INET localhost:31415", ipi_context());
  EXPECT_EQ(inet.ipi->address.kind, IpiAddress::Kind::Inet);
  EXPECT_EQ(inet.ipi->address.name, "localhost");
  EXPECT_EQ(inet.ipi->address.port, 31415);
  EXPECT_EQ(parse("inet 0", ipi_context()).ipi->address.name, "127.0.0.1");

  const auto ipi_error = [](const std::string& line) { return error_of(line, ipi_context()); };
  EXPECT_NE(ipi_error("unix a/b").find("socket name without '/'"), std::string::npos);
  EXPECT_NE(ipi_error("inet :31415").find("empty host"), std::string::npos);
  EXPECT_NE(ipi_error("inet 70000").find("reference ipi inet <port> must be an integer in [0, 65535]"),
            std::string::npos);
  EXPECT_NE(ipi_error("pipe x").find("reference ipi takes unix <name> or inet"), std::string::npos);
  EXPECT_NE(ipi_error("unix").find("reference ipi takes unix <name> or inet"), std::string::npos);
  EXPECT_NE(ipi_error("unix si connect_timeout 0").find("connect_timeout must be a finite number in (0, "),
            std::string::npos);
  EXPECT_NE(ipi_error("unix si timeout 1e8").find("timeout must be a finite number in (0, "),
            std::string::npos);
  EXPECT_NE(ipi_error("unix si retries 1001").find("retries must be an integer in [0, 1000]"),
            std::string::npos);
  EXPECT_NE(ipi_error("unix si not_converged SCF").find("not_converged needs client_log"),
            std::string::npos);
  TrainerKeywordContext lj = ipi_context();
  lj.unit_style = "lj";
  EXPECT_NE(error_of("unix si drive model", lj).find("reference ipi: "), std::string::npos);
}

TEST(TrainerKeywords, EveryClosedSetFollowsOneCaseRule) {
  EXPECT_EQ(parse("precision FP16").trainer.session.precision, Precision::Float16);
  EXPECT_EQ(parse("precision Torch.BFloat16").trainer.session.precision, Precision::BFloat16);
  EXPECT_EQ(parse("optimizer ADAMW").trainer.session.optimizer, OptimizerKind::AdamW);
  EXPECT_EQ(parse("drive Auto").trainer.policy.mode, DriveMode::Auto);
  EXPECT_EQ(parse("drive REFERENCE").trainer.policy.mode, DriveMode::Reference);
  EXPECT_EQ(parse("lr_schedule Cosine 100").trainer.session.lr_schedule, LRScheduleKind::Cosine);
  EXPECT_FALSE(parse("max_calls 3 Skip").trainer.budget_stops_run);
  EXPECT_EQ(parse("Unix si", ipi_context()).ipi->address.kind, IpiAddress::Kind::Unix);
}

TEST(TrainerKeywords, TheKeywordListStartsWithPrecisionAndNamesEveryKeyword) {
  const std::string list = trainer_keyword_list();
  EXPECT_EQ(list.rfind("precision, every, ", 0), 0u) << list;
  for (const char* keyword : {"drive", "accuracy", "journal", "client", "retries", "lr_schedule"})
    EXPECT_NE(list.find(keyword), std::string::npos) << keyword;
}

TEST(TrainerKeywords, TheDocPageTableListsTheKeywordsInTheTablesOrder) {
  std::ifstream doc(std::string(OTF_SOURCE_DIR) + "/doc/fix_otf_train.md");
  ASSERT_TRUE(doc) << "doc/fix_otf_train.md not found";
  std::string documented;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const auto end = line.find('`', 3);
    documented += (documented.empty() ? "" : ", ") + line.substr(3, end - 3);
  }
  EXPECT_EQ(documented, trainer_keyword_list());
}

TEST(TrainerOutputs, TheDocPageListsTheNamedOutputsInTheirOrder) {
  std::ifstream doc(std::string(OTF_SOURCE_DIR) + "/doc/fix_otf_train.md");
  ASSERT_TRUE(doc) << "doc/fix_otf_train.md not found";
  // Items "N. `name`: ..." of the global vector's list.
  std::vector<std::string> documented;
  for (std::string line; std::getline(doc, line);) {
    const auto dot = line.find(". `");
    if (dot == std::string::npos || dot == 0 || dot > 2) continue;
    const std::string number = line.substr(0, dot);
    if (number.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto end = line.find('`', dot + 3);
    ASSERT_EQ(std::stoul(number), documented.size() + 1) << line;
    documented.push_back(line.substr(dot + 3, end - dot - 3));
  }
  ASSERT_EQ(documented.size(), trainer_output_count());
  for (std::size_t i = 0; i < documented.size(); ++i) {
    EXPECT_EQ(documented[i], trainer_output_name(i)) << "element " << i + 1;
    EXPECT_EQ(trainer_output_index(documented[i]), i);
  }
  EXPECT_EQ(trainer_output_name(trainer_output_count()), "");
  EXPECT_FALSE(trainer_output_index("nonsense").has_value());
  // Before the trainer exists only the learning rate is known.
  TrainerSettings settings;
  settings.session.learning_rate = 3e-3;
  EXPECT_EQ(trainer_output(nullptr, settings, *trainer_output_index("learning_rate")), 3e-3);
  EXPECT_EQ(trainer_output(nullptr, settings, *trainer_output_index("loss")), 0.0);
  EXPECT_EQ(trainer_output(nullptr, settings, 99), 0.0);
}

}  // namespace
}  // namespace otf

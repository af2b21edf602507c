// The trainer without LAMMPS: a Morse reference behind the Reference interface and a frame source
// that serves periodic argon configurations. The policy decides, the reference is called exactly
// when and how it should be (Drive while it drives, Label otherwise), calls are counted once, the
// model takes over under drive auto, and a restart archive continues the run exactly.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <cstdio>
#include <set>
#include <string>

#include "frame_gather.h"
#include "label_journal.h"
#include "learning_log.h"

#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include "restart_archive.h"
#include "training_test_support.h"

namespace otf::testing {
namespace {

constexpr double kCutoff = 4.5;

TrainerSettings base_settings() {
  TrainerSettings settings;
  settings.session.stats_frames = 2;
  settings.session.steps_per_frame = 1;
  settings.session.batch_frames = 2;
  settings.session.validation_fraction = 0.25;
  settings.policy.label_every = 2;
  return settings;
}

// A reference that gives up (as an i-PI client does once its retries are spent) on some steps,
// and on others answers with its forces multiplied by a factor (NaN: NaN forces), as a reference
// does on a configuration with atoms pushed into each other.
class FailingReference : public Reference {
 public:
  FailingReference(Reference& inner, std::set<int64_t> failing_steps,
                   std::map<int64_t, double> force_factors = {}) :
      inner_(inner), failing_steps_(std::move(failing_steps)),
      force_factors_(std::move(force_factors)) {}
  std::string description() const override { return "failing (test)"; }
  ReferenceLabel label(const ReferenceConfiguration& configuration, ReferenceUse use) override {
    if (failing_steps_.count(configuration.step) != 0)
      throw ReferenceFailure("client returned NaN forces (test)");
    ReferenceLabel label = inner_.label(configuration, use);
    const auto factor = force_factors_.find(configuration.step);
    if (factor != force_factors_.end())
      for (double& f : label.owned_forces) f *= factor->second;
    const auto offset = energy_offsets_per_atom.find(configuration.step);
    if (offset != energy_offsets_per_atom.end()) {
      long long atoms = configuration.num_local;
      MPI_Allreduce(MPI_IN_PLACE, &atoms, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      label.energy += offset->second * static_cast<double>(atoms);
    }
    return label;
  }
  // Per step: added to the energy per atom (a collapsed or exploded structure).
  std::map<int64_t, double> energy_offsets_per_atom;

 private:
  Reference& inner_;
  std::set<int64_t> failing_steps_;
  std::map<int64_t, double> force_factors_;
};

struct TrainerRun {
  explicit TrainerRun(const TrainerSettings& settings, std::set<int64_t> failing_steps = {},
                      std::map<int64_t, double> force_factors = {}) :
      configurations(argon_configurations(5, kCutoff)),
      reference(&source.current),
      failing(reference, std::move(failing_steps), std::move(force_factors)),
      trainer(argon_model(kCutoff), settings, failing, MPI_COMM_WORLD,
              TrainerMessages{{}, [this](const std::string& line) { warnings.push_back(line); }}) {}

  // Steps [first, last], the configuration cycling every step.
  void steps(int64_t first, int64_t last) {
    for (int64_t step = first; step <= last; ++step) {
      source.step = step;
      source.current = configurations[static_cast<std::size_t>(step) % configurations.size()].get();
      trainer.on_step(step, source);
    }
  }

  std::vector<std::unique_ptr<MdConfiguration>> configurations;
  TestFrameSource source;
  RecordingReference reference;
  FailingReference failing;   // fails on the given steps, else answers as `reference`
  std::vector<std::string> warnings;
  OnTheFlyTrainer trainer;
};

TEST(OnTheFlyTrainer, DriveReferenceCallsTheReferenceEveryStepAndLabelsOnSchedule) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Reference;
  TrainerRun run(settings);
  run.steps(0, 9);
  ASSERT_EQ(run.reference.uses.size(), 10u);
  for (const ReferenceUse use : run.reference.uses) EXPECT_EQ(use, ReferenceUse::Drive);
  EXPECT_EQ(run.trainer.counters().reference_calls, 10);
  EXPECT_EQ(run.trainer.session().report().buffer_frames, 5);   // steps 0, 2, 4, 6, 8
  EXPECT_GT(run.trainer.session().report().optimizer_steps, 0);
  // A repeated step (setup() of the next run) asks the reference for its forces again, but the
  // call is counted once.
  run.steps(9, 9);
  EXPECT_EQ(run.reference.uses.size(), 11u);
  EXPECT_EQ(run.trainer.counters().reference_calls, 10);
}

TEST(OnTheFlyTrainer, DriveModelOnlyLabelsAndMeasuresTheUncertainty) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  TrainerRun run(settings);
  run.steps(0, 9);
  ASSERT_EQ(run.reference.uses.size(), 5u);
  for (const ReferenceUse use : run.reference.uses) EXPECT_EQ(use, ReferenceUse::Label);
  EXPECT_EQ(run.reference.steps, (std::vector<int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(run.trainer.counters().reference_calls, 5);
  EXPECT_GT(run.trainer.counters().max_uncertainty, 0.0);
  for (const double u : run.source.uncertainty) EXPECT_GE(u, 0.0);
  EXPECT_EQ(run.trainer.policy().state().model_driven_steps, 10);
}

// drive auto with loose thresholds: the model takes over at the first validated label, and
// nothing it sees afterwards is uncertain enough to label; checks every 3 steps.
TrainerSettings auto_settings_that_hand_over_at_once() {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Auto;
  settings.policy.check_every = 3;
  settings.policy.hand_over_force_rmse = 1e6;
  settings.policy.label_uncertainty = 1e6;
  settings.policy.take_over_uncertainty = 1e7;
  return settings;
}

TEST(OnTheFlyTrainer, DriveAutoHandsOverAndThenOnlyChecks) {
  TrainerRun run(auto_settings_that_hand_over_at_once());
  run.steps(0, 20);
  EXPECT_FALSE(run.trainer.reference_drives());
  const int64_t calls = run.trainer.counters().reference_calls;
  const std::size_t drives = static_cast<std::size_t>(
      std::count(run.reference.uses.begin(), run.reference.uses.end(), ReferenceUse::Drive));
  EXPECT_EQ(drives, run.reference.uses.size()) << "the reference only drives before hand-over";
  EXPECT_EQ(calls, static_cast<int64_t>(run.reference.uses.size()));
  const int64_t handed_over_after = run.reference.steps.back();
  EXPECT_EQ(run.trainer.policy().state().model_driven_steps, 20 - handed_over_after);
  EXPECT_EQ(run.trainer.policy().state().model_phase_labels, 0);
  EXPECT_EQ(run.trainer.policy().state().last_checked_step, 18);
}

TEST(OnTheFlyTrainer, ARestartArchiveContinuesTheRunExactly) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  TrainerRun uninterrupted(settings);
  uninterrupted.steps(0, 7);
  const std::string blob = uninterrupted.trainer.save_restart(7);
  ASSERT_FALSE(blob.empty());

  TrainerRun resumed(settings);
  resumed.trainer.load_restart(decode_restart(blob.data(), blob.size()));
  resumed.trainer.finish_restart_setup();
  EXPECT_EQ(resumed.trainer.session().weights_hash(), uninterrupted.trainer.session().weights_hash());
  EXPECT_EQ(resumed.trainer.counters().reference_calls, 4);
  uninterrupted.steps(8, 13);
  resumed.steps(8, 13);
  EXPECT_EQ(resumed.trainer.session().weights_hash(), uninterrupted.trainer.session().weights_hash());
  EXPECT_EQ(resumed.trainer.session().report().last_loss,
            uninterrupted.trainer.session().report().last_loss);
  EXPECT_EQ(resumed.trainer.counters().reference_calls,
            uninterrupted.trainer.counters().reference_calls);
  EXPECT_EQ(resumed.trainer.policy().state().model_driven_steps,
            uninterrupted.trainer.policy().state().model_driven_steps);
}

TEST(OnTheFlyTrainer, AFailedLabelIsSkippedAndCountedWhileTheModelDrives) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  TrainerRun run(settings, {2, 6});
  run.steps(0, 9);
  EXPECT_EQ(run.trainer.counters().skipped_labels, 2);
  EXPECT_EQ(run.trainer.counters().reference_calls, 3);   // steps 0, 4, 8
  EXPECT_EQ(run.trainer.session().report().buffer_frames, 3);
  ASSERT_EQ(run.warnings.size(), 2u);
  EXPECT_NE(run.warnings[0].find("step 2: label skipped, the model drives on"), std::string::npos)
      << run.warnings[0];
  EXPECT_NE(run.warnings[0].find("NaN forces"), std::string::npos);
}

TEST(OnTheFlyTrainer, AFailedLabelStopsTheRunWhileTheReferenceDrives) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Reference;
  TrainerRun run(settings, {3});
  try {
    run.steps(0, 9);
    FAIL() << "no error";
  } catch (const TrainingError& error) {
    EXPECT_NE(std::string(error.what()).find("the reference drives the MD but could not label "
                                             "step 3: client returned NaN forces"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(run.trainer.counters().skipped_labels, 0);
}

TEST(OnTheFlyTrainer, TheJournalHoldsEveryAnswerAndAWarmStartRefillsTheBuffer) {
  const std::string journal = ::testing::TempDir() + "otf-trainer-journal-" +
                              std::to_string(::getpid()) + ".extxyz";
  std::remove(journal.c_str());
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Reference;
  settings.journal_path = journal;
  settings.type_elements = {"", "Ar"};
  {
    TrainerRun run(settings);
    run.steps(0, 5);
    run.steps(5, 5);   // a repeated step is not journalled twice
  }
  const ExtxyzContents contents = read_extxyz_file(journal);
  ASSERT_EQ(contents.frames.size(), 6u);
  const auto configurations = argon_configurations(5, kCutoff);
  for (std::size_t k = 0; k < contents.frames.size(); ++k) {
    const JournalFrame& frame = contents.frames[k];
    const MdConfiguration& expected = *configurations[k % configurations.size()];
    EXPECT_EQ(frame.step, static_cast<int64_t>(k));
    EXPECT_EQ(frame.call, static_cast<int64_t>(k + 1));
    EXPECT_EQ(frame.units, "metal");
    EXPECT_EQ(frame.energy, expected.energy());
    EXPECT_EQ(frame.forces, expected.owned_forces());
    EXPECT_EQ(frame.symbols, std::vector<std::string>(frame.symbols.size(), "Ar"));
    // Labelled steps (every 2) carry the uncertainty measured before the label was learned.
    EXPECT_EQ(frame.uncertainty.empty(), k % 2 == 1) << "frame " << k;
  }

  TrainerSettings warm = base_settings();
  warm.policy.mode = DriveMode::Model;
  warm.warm_start_paths = {journal};
  TrainerRun run(warm);
  run.steps(0, 0);
  EXPECT_EQ(run.trainer.session().report().buffer_frames, 7);   // 6 journalled + step 0
  EXPECT_GT(run.trainer.session().report().optimizer_steps, 0);
  // The journal's labels came from steps 0-5: the policy's verifications are spaced as if that
  // history were the run's own.
  EXPECT_EQ(run.trainer.policy().state().inherited_history, 5);

  TrainerSettings other_units = warm;
  other_units.unit_style = "real";
  TrainerRun refused(other_units);
  try {
    refused.steps(0, 0);
    FAIL() << "no error";
  } catch (const TrainingError& error) {
    EXPECT_NE(std::string(error.what()).find("in units metal, this run in units real"),
              std::string::npos)
        << error.what();
  }
  std::remove(journal.c_str());
}

TEST(OnTheFlyTrainer, ABudgetOfReferenceCallsStopsTheRun) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  settings.max_reference_calls = 3;
  TrainerRun run(settings);
  run.steps(0, 3);
  EXPECT_FALSE(run.trainer.stop_requested());
  run.steps(4, 4);   // the third call
  EXPECT_TRUE(run.trainer.stop_requested());
  EXPECT_NE(run.trainer.stop_reason().find("max_calls 3"), std::string::npos);
  run.steps(5, 9);   // an MD code that goes on anyway gets no more calls
  EXPECT_EQ(run.trainer.counters().reference_calls, 3);
  EXPECT_EQ(run.reference.uses.size(), 3u);
}

TEST(OnTheFlyTrainer, ABudgetThatSkipsLabelsLetsTheModelDriveOn) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  settings.max_reference_calls = 2;
  settings.budget_stops_run = false;
  TrainerRun run(settings);
  run.steps(0, 9);
  EXPECT_FALSE(run.trainer.stop_requested());
  EXPECT_EQ(run.trainer.counters().reference_calls, 2);
  EXPECT_EQ(run.trainer.counters().skipped_labels, 0) << "a spent budget is no failure";
  // The reference cannot drive without calls: then the run must stop.
  settings.policy.mode = DriveMode::Reference;
  TrainerRun driven(settings);
  driven.steps(0, 2);
  EXPECT_EQ(driven.trainer.counters().reference_calls, 2);
  EXPECT_TRUE(driven.trainer.stop_requested());
  EXPECT_NE(driven.trainer.stop_reason().find("the reference would drive"), std::string::npos);
}

// Rows of a learning log without the timing columns (they differ between runs).
// The rows of a learning log without its two wall-time columns (which differ from run to run).
std::vector<std::string> learning_rows(const std::string& path) {
  std::ifstream file(path);
  std::vector<std::string> rows;
  std::string line;
  std::vector<bool> timing;
  while (std::getline(file, line)) {
    std::vector<std::string> fields;
    std::stringstream stream(line);
    std::string field;
    while (std::getline(stream, field, ',')) fields.push_back(field);
    if (timing.empty())
      for (const auto& name : fields)
        timing.push_back(name == "reference_seconds" || name == "training_seconds");
    std::string row;
    for (std::size_t k = 0; k < fields.size(); ++k)
      if (k >= timing.size() || !timing[k]) row += fields[k] + ",";
    rows.push_back(row);
  }
  return rows;
}

TEST(OnTheFlyTrainer, TheLearningLogHasARowPerLabelAndCheckAndSurvivesARestart) {
  const std::string base = ::testing::TempDir() + "otf-learning-" + std::to_string(::getpid());
  TrainerSettings settings = auto_settings_that_hand_over_at_once();
  settings.learning_log_path = base + "-whole.csv";
  TrainerRun whole(settings);
  whole.steps(0, 13);
  const std::vector<std::string> expected = learning_rows(settings.learning_log_path);
  ASSERT_GE(expected.size(), 4u);
  EXPECT_EQ(expected[0].rfind("step,event,drive,reference_calls,loss,", 0), 0u) << expected[0];
  int labels = 0, checks = 0;
  for (const auto& row : expected) {
    labels += row.find(",label,") != std::string::npos;
    checks += row.find(",check,") != std::string::npos;
  }
  EXPECT_EQ(labels, whole.trainer.session().report().buffer_frames);
  EXPECT_GT(checks, 0);

  // Interrupted after step 7 (the rows of steps 8-9 written before the "crash" are written again
  // by the restarted run): the same rows, none twice.
  settings.learning_log_path = base + "-restarted.csv";
  std::string blob;
  {
    TrainerRun first(settings);
    first.steps(0, 7);
    blob = first.trainer.save_restart(7);
    first.steps(8, 9);
  }
  TrainerRun resumed(settings);
  resumed.trainer.load_restart(decode_restart(blob.data(), blob.size()));
  resumed.trainer.finish_restart_setup();
  resumed.steps(7, 13);   // step 7 again, as setup() of the continued run evaluates it
  EXPECT_EQ(learning_rows(settings.learning_log_path), expected);
  std::remove((base + "-whole.csv").c_str());
  std::remove((base + "-restarted.csv").c_str());
}

// drive auto by accuracy, with targets the test model meets at once: the model drives once
// min_labels labels were predicted before they were learned.
TrainerSettings accuracy_settings(double force_target, double energy_target) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Auto;
  settings.policy.check_every = 3;
  settings.policy.target_force_error = force_target;
  settings.policy.target_energy_error = energy_target;
  settings.policy.min_labels = 2;
  settings.label_steps = 0;    // one round of training per label
  return settings;
}

TEST(OnTheFlyTrainer, AccuracyCalibratesOnEveryLabelAndHandsOverAfterMinLabels) {
  TrainerRun run(accuracy_settings(1e6, 1e6));
  run.steps(0, 20);
  // While the reference drives every step is a label (each answer is learned, label_every 2
  // notwithstanding): statistics come from the labels of steps 0 and 1 (stats_frames 2), training
  // starts at step 1; the labels of steps 2 and 3 are the first two predicted by a trained model.
  // (Learning only every label_every-th answer, the model took over after step 8.)
  EXPECT_EQ(run.trainer.session().statistics_summary().frames, 2);
  EXPECT_EQ(run.trainer.calibration().samples(), 2);
  EXPECT_FALSE(run.trainer.reference_drives());
  EXPECT_EQ(run.trainer.policy().state().model_driven_steps, 17);   // steps 4-20
  EXPECT_GE(run.trainer.counters().label_force_error, 0.0);
  EXPECT_GT(run.trainer.calibration().force_scale(), 0.0);
  EXPECT_GT(run.trainer.counters().predicted_force_error, 0.0);
  EXPECT_EQ(run.trainer.policy().state().model_phase_labels, 0);
  EXPECT_NE(run.trainer.calibration_summary().find("Spearman"), std::string::npos);
}

TEST(OnTheFlyTrainer, AccuracyLabelsWhatIsPredictedAboveTheTarget) {
  // A force target no model meets: every check is labelled, and the first label's error sends
  // the MD back to the reference (above take_over x target) until the model qualifies, which it
  // never does.
  TrainerRun run(accuracy_settings(1e-9, 1e6));
  run.steps(0, 20);
  EXPECT_TRUE(run.trainer.reference_drives());
  EXPECT_EQ(run.trainer.policy().state().model_driven_steps, 0);
  // Every step's label from step 2 on was predicted by a trained model; the model of step 20's
  // had learned 20 labels, those of steps 2-9 fewer than half as many: their samples are
  // dropped, steps 10-20 remain.
  EXPECT_EQ(run.trainer.calibration().samples(), 11);
  const double predicted = run.trainer.counters().predicted_force_error;
  EXPECT_GT(predicted, 0.0);
}

TEST(OnTheFlyTrainer, LabelStepsTrainUntilTheLabelIsFittedOrTheBudgetIsSpent) {
  TrainerSettings settings = accuracy_settings(1e-9, 1e6);   // never fitted: the whole budget
  settings.label_steps = 5;
  TrainerRun budget(settings);
  budget.steps(0, 6);
  // The reference drives: labels at every step 0-6; training from the label of step 1
  // (statistics ready after two frames): 6 x 5 steps.
  EXPECT_EQ(budget.trainer.session().report().optimizer_steps, 30);
  settings = accuracy_settings(1e6, 1e6);                    // fitted at once: one round
  settings.label_steps = 5;
  TrainerRun fitted(settings);
  fitted.steps(0, 6);
  // One round per label until the model drives (after the labels of steps 2 and 3, the first two
  // predicted: min_labels 2), then none: steps 1, 2 and 3.
  EXPECT_EQ(fitted.trainer.session().report().optimizer_steps, 3);
}

TEST(OnTheFlyTrainer, AnAccuracyRunContinuesExactlyFromARestart) {
  TrainerSettings settings = accuracy_settings(0.02, 1e6);
  settings.policy.min_labels = 1;
  TrainerRun uninterrupted(settings);
  uninterrupted.steps(0, 9);
  const std::string blob = uninterrupted.trainer.save_restart(9);
  TrainerRun resumed(settings);
  resumed.trainer.load_restart(decode_restart(blob.data(), blob.size()));
  resumed.trainer.finish_restart_setup();
  EXPECT_EQ(resumed.trainer.calibration().encode(), uninterrupted.trainer.calibration().encode());
  uninterrupted.steps(10, 24);
  resumed.steps(10, 24);
  EXPECT_EQ(resumed.trainer.calibration().encode(), uninterrupted.trainer.calibration().encode());
  EXPECT_EQ(resumed.trainer.session().weights_hash(), uninterrupted.trainer.session().weights_hash());
  EXPECT_EQ(resumed.trainer.counters().reference_calls,
            uninterrupted.trainer.counters().reference_calls);
  EXPECT_EQ(resumed.trainer.counters().predicted_force_error,
            uninterrupted.trainer.counters().predicted_force_error);
  EXPECT_EQ(resumed.trainer.policy().state().model_driven_steps,
            uninterrupted.trainer.policy().state().model_driven_steps);
}

TEST(OnTheFlyTrainer, AnOutlierLabelIsNotLearnedAndThreeInARowStopTheRun) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  settings.policy.label_every = 1;
  // Steps 0-11 are ordinary labels; 12 has forces 1000 x larger (atoms pushed together), 13 NaN
  // forces, 14 is ordinary again; 16, 17 and 18 are outliers in a row.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TrainerRun run(settings, {}, {{12, 1000.0}, {13, nan}, {16, 1000.0}, {17, 1000.0}, {18, 1000.0}});
  run.steps(0, 11);
  EXPECT_EQ(run.trainer.counters().learned_labels, 12);
  const int64_t frames = run.trainer.session().report().buffer_frames;
  const uint64_t weights = run.trainer.session().weights_hash();
  run.steps(12, 13);
  EXPECT_EQ(run.trainer.counters().skipped_labels, 2);
  EXPECT_EQ(run.trainer.session().report().buffer_frames, frames);    // nothing stored
  EXPECT_EQ(run.trainer.session().weights_hash(), weights);           // nothing learned
  ASSERT_EQ(run.warnings.size(), 2u);
  EXPECT_NE(run.warnings[0].find("step 12: label not learned, its largest force component"),
            std::string::npos) << run.warnings[0];
  EXPECT_NE(run.warnings[0].find("more than 20 x the largest of the 12 labels learned so far"),
            std::string::npos) << run.warnings[0];
  EXPECT_NE(run.warnings[1].find("step 13: label not learned, its energy, forces or virial are "
                                 "not finite"),
            std::string::npos) << run.warnings[1];
  run.steps(14, 15);    // learned again: the count of refusals in a row starts over
  EXPECT_EQ(run.trainer.counters().refused_labels_in_row, 0);
  EXPECT_EQ(run.trainer.counters().learned_labels, 14);
  try {
    run.steps(16, 18);
    FAIL() << "three outliers in a row did not stop the run";
  } catch (const TrainingError& error) {
    EXPECT_NE(std::string(error.what()).find("step 18: 3 labels in a row were not learned"),
              std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("Stopped before the model learns from them"),
              std::string::npos) << error.what();
  }
}

TEST(OnTheFlyTrainer, TheOutlierGuardWaitsForTenLabelsAndCanBeTurnedOff) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  settings.policy.label_every = 1;
  // The first labels set the scale, whatever it is (a perfect crystal's first forces are zero).
  TrainerRun early(settings, {}, {{5, 1000.0}});
  early.steps(0, 11);
  EXPECT_EQ(early.trainer.counters().skipped_labels, 0);
  settings.outlier_factor = 0.0;
  TrainerRun off(settings, {}, {{12, 1000.0}, {13, 1000.0}, {14, 1000.0}});
  off.steps(0, 14);
  EXPECT_EQ(off.trainer.counters().skipped_labels, 0);
  EXPECT_EQ(off.trainer.counters().learned_labels, 15);
}

TEST(OnTheFlyTrainer, TheEnergyGuardSparesReferenceDrivenMdAndCanBeSetOrTurnedOff) {
  // The reference drives: a structure relaxing by eVs per atom is physical, learned.
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Reference;
  TrainerRun relaxing(settings);
  relaxing.failing.energy_offsets_per_atom = {{0, 6.0}, {2, 4.0}, {4, 2.0}};
  relaxing.steps(0, 6);
  EXPECT_EQ(relaxing.trainer.counters().skipped_labels, 0);
  // The model drives (drive model): refused beyond outlier_energy, and the model drives on.
  settings.policy.mode = DriveMode::Model;
  settings.outlier_energy = 0.5;
  TrainerRun guarded(settings);
  guarded.failing.energy_offsets_per_atom = {{6, 0.4}, {8, 1.0}};
  guarded.steps(0, 9);
  EXPECT_EQ(guarded.trainer.counters().skipped_labels, 1);   // step 8 only
  EXPECT_FALSE(guarded.trainer.reference_drives());
  settings.outlier_energy = 0.0;
  TrainerRun off(settings);
  off.failing.energy_offsets_per_atom = {{8, 100.0}};
  off.steps(0, 9);
  EXPECT_EQ(off.trainer.counters().skipped_labels, 0);
  EXPECT_DOUBLE_EQ(default_outlier_energy("metal"), 1.0);
  EXPECT_NEAR(default_outlier_energy("real"), 23.0605, 1e-3);   // kcal/mol
  EXPECT_EQ(default_outlier_energy("lj"), 0.0);
}

// A reference that labels in the background (as an ab initio code in its own process does): an
// answer is there only once the trainer has asked `polls` times whether it is; `failing_steps`
// answer with a failure.
class BackgroundReference : public Reference {
 public:
  BackgroundReference(Reference& inner, int polls, std::set<int64_t> failing_steps = {})
      : inner_(inner), polls_(polls), failing_steps_(std::move(failing_steps)) {}
  std::string description() const override { return "background (test)"; }
  ReferenceLabel label(const ReferenceConfiguration& configuration, ReferenceUse use) override {
    waited_for.push_back(configuration.step);
    waited_uses.push_back(use);
    return inner_.label(configuration, use);
  }
  std::unique_ptr<PendingLabel> start_label(const ReferenceConfiguration& configuration) override {
    started.push_back(configuration.step);
    if (in_flight_ > 0) started_while_in_flight = true;
    ReferenceLabel label = inner_.label(configuration, ReferenceUse::Label);
    const FrameGather whole(configuration, MPI_COMM_WORLD);
    label.owned_forces = whole.gather(label.owned_forces.data(), 3);
    return std::make_unique<Answer>(*this, std::move(label), polls_,
                                    failing_steps_.count(configuration.step) != 0);
  }
  std::vector<int64_t> waited_for, started;
  std::vector<ReferenceUse> waited_uses;
  bool started_while_in_flight = false;

 private:
  class Answer : public PendingLabel {
   public:
    Answer(BackgroundReference& owner, ReferenceLabel label, int polls, bool fails)
        : owner_(owner), label_(std::move(label)), polls_(polls), fails_(fails) {
      ++owner_.in_flight_;
    }
    ~Answer() override { --owner_.in_flight_; }
    Answer(const Answer&) = delete;
    Answer& operator=(const Answer&) = delete;
    bool ready() override { return ++asked_ > polls_; }
    ReferenceLabel wait() override {
      if (fails_) throw ReferenceFailure("the client's SCF did not converge (test)");
      return label_;
    }

   private:
    BackgroundReference& owner_;
    ReferenceLabel label_;
    int polls_;
    bool fails_;
    int asked_ = 0;
  };
  Reference& inner_;
  int polls_;
  std::set<int64_t> failing_steps_;
  int in_flight_ = 0;
};

struct BackgroundRun {
  BackgroundRun(const TrainerSettings& settings, int polls, std::set<int64_t> failing_steps = {})
      : configurations(argon_configurations(5, kCutoff)),
        reference(&source.current),
        background(reference, polls, std::move(failing_steps)),
        trainer(argon_model(kCutoff), settings, background, MPI_COMM_WORLD,
                TrainerMessages{[this](const std::string& line) { log.push_back(line); },
                                [this](const std::string& line) { warnings.push_back(line); }}) {}
  void steps(int64_t first, int64_t last) {
    for (int64_t step = first; step <= last; ++step) {
      source.step = step;
      source.current = configurations[static_cast<std::size_t>(step) % configurations.size()].get();
      trainer.on_step(step, source);
    }
  }
  bool logged(const std::string& text) const {
    return std::any_of(log.begin(), log.end(),
                       [&](const std::string& line) { return line.find(text) != std::string::npos; });
  }

  std::vector<std::unique_ptr<MdConfiguration>> configurations;
  TestFrameSource source;
  RecordingReference reference;
  BackgroundReference background;
  std::vector<std::string> log, warnings;
  OnTheFlyTrainer trainer;
};

// drive auto by accuracy whose model takes over after a few labels and then asks for more
// (without label_wait: 9 labels asked for while the model drives steps 0-30), label_wait no.
TrainerSettings background_settings() {
  TrainerSettings settings = accuracy_settings(0.4, 1e6);
  settings.policy.min_labels = 1;
  settings.label_wait = false;
  settings.type_elements = {"", "Ar"};  // the label is kept whole, as a journal record is
  return settings;
}

TEST(OnTheFlyTrainer, WithoutLabelWaitTheMdGoesOnAndTheAnswerIsLearnedWhenItArrives) {
  BackgroundRun run(background_settings(), 2);
  run.steps(0, 30);
  run.trainer.end_of_run(30);
  // The labels the reference drove with were waited for (their forces move the atoms); those the
  // model's driving asked for went to the background, one at a time, and each was learned on a
  // later step than it was asked on.
  ASSERT_FALSE(run.background.started.empty());
  EXPECT_FALSE(run.background.started_while_in_flight);
  const int64_t first_background = run.background.started.front();
  EXPECT_LT(run.background.waited_for.front(), first_background);
  // A label waited for while the model drove: only after a check that found the MD had left the
  // region of the label in flight.
  const auto waited_while_model_drove = static_cast<std::size_t>(std::count(
      run.background.waited_uses.begin(), run.background.waited_uses.end(), ReferenceUse::Label));
  const auto left_region = static_cast<std::size_t>(
      std::count_if(run.log.begin(), run.log.end(), [](const std::string& line) {
        return line.find("since the label in flight") != std::string::npos;
      }));
  EXPECT_EQ(waited_while_model_drove, left_region);
  EXPECT_TRUE(run.logged("learned the label of step " + std::to_string(first_background) +
                         " (the MD went on"));
  // Every call paid for was learned.
  EXPECT_EQ(run.trainer.counters().learned_labels, run.trainer.counters().reference_calls);
  EXPECT_EQ(run.trainer.counters().reference_calls,
            static_cast<int64_t>(run.background.waited_for.size() + run.background.started.size()));
  EXPECT_EQ(run.trainer.counters().skipped_labels, 0);
  // The answers that arrived later were compared with the prediction made when they were asked.
  EXPECT_GT(run.trainer.calibration().samples(), 0);
}

TEST(OnTheFlyTrainer, ALabelInFlightIsLearnedBeforeTheRunEndsOrARestartFileIsWritten) {
  // Answers that never arrive by themselves: the label in flight is waited for at the end of a
  // run, and before the state goes into a restart file.
  for (const bool restart : {false, true}) {
    BackgroundRun run(background_settings(), 1000000);
    int64_t step = 0;
    for (; step <= 30 && run.background.started.empty(); ++step) run.steps(step, step);
    ASSERT_EQ(run.background.started.size(), 1u);
    run.steps(step, step);  // the MD goes on
    const int64_t calls = run.trainer.counters().reference_calls;
    EXPECT_EQ(run.trainer.counters().learned_labels, calls - 1);
    if (restart) {
      EXPECT_FALSE(run.trainer.save_restart(step).empty());
    } else {
      run.trainer.end_of_run(step);
    }
    EXPECT_EQ(run.trainer.counters().learned_labels, calls);
    EXPECT_EQ(run.trainer.counters().reference_calls, calls);
  }
}

TEST(OnTheFlyTrainer, AFailedAnswerInFlightIsSkippedAndTheModelDrivesOn) {
  BackgroundRun probe(background_settings(), 2);
  probe.steps(0, 30);
  ASSERT_FALSE(probe.background.started.empty());
  const int64_t first_background = probe.background.started.front();
  BackgroundRun run(background_settings(), 2, {first_background});
  run.steps(0, 30);
  run.trainer.end_of_run(30);
  EXPECT_EQ(run.trainer.counters().skipped_labels, 1);
  EXPECT_EQ(run.trainer.counters().learned_labels, run.trainer.counters().reference_calls - 1);
  ASSERT_FALSE(run.warnings.empty());
  EXPECT_NE(run.warnings.front().find("the label of step " + std::to_string(first_background) +
                                      " skipped"),
            std::string::npos)
      << run.warnings.front();
  EXPECT_GT(run.background.started.size(), 1u) << "later labels are asked for again";
}

TEST(OnTheFlyTrainer, LabelWaitNoAppliesToDriveAutoOnly) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Model;
  settings.label_wait = false;
  try {
    check_trainer_fields(settings);
    FAIL() << "label_wait no with drive model was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("label_wait no applies to drive auto only"),
              std::string::npos);
  }
}

TEST(OnTheFlyTrainer, SaveEveryNeedsAFile) {
  TrainerSettings settings = base_settings();
  settings.save_every = 10;
  MdConfiguration const* none = nullptr;
  RecordingReference reference(&none);
  EXPECT_THROW(OnTheFlyTrainer(argon_model(kCutoff), settings, reference, MPI_COMM_WORLD, {}),
               TrainingError);
}

}  // namespace
}  // namespace otf::testing

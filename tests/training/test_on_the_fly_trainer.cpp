// The trainer without LAMMPS: a Morse reference behind the Reference interface and a frame source
// that serves periodic argon configurations. The policy decides, the reference is called exactly
// when and how it should be (Drive while it drives, Label otherwise), calls are counted once, the
// model takes over under drive auto, and a restart archive continues the run exactly.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <vector>

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

struct TrainerRun {
  explicit TrainerRun(const TrainerSettings& settings) :
      configurations(argon_configurations(5, kCutoff)),
      reference(&source.current),
      trainer(argon_model(kCutoff), settings, reference, MPI_COMM_WORLD, messages()) {}

  static TrainerMessages messages() { return {}; }
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

TEST(OnTheFlyTrainer, DriveAutoHandsOverAndThenOnlyChecks) {
  TrainerSettings settings = base_settings();
  settings.policy.mode = DriveMode::Auto;
  settings.policy.check_every = 3;
  // Loose thresholds: the model takes over at the first validated label, and nothing it sees
  // afterwards is uncertain enough to label.
  settings.policy.hand_over_force_rmse = 1e6;
  settings.policy.label_uncertainty = 1e6;
  settings.policy.take_over_uncertainty = 1e7;
  TrainerRun run(settings);
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

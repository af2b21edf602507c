// The on-the-fly policy on its own: who drives, when a label or an uncertainty check is due, the
// hand-over and take-over rules, repeated setup() steps and the restart of its state.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "on_the_fly_policy.h"

namespace otf {
namespace {

PolicySettings auto_settings() {
  PolicySettings s;
  s.mode = DriveMode::Auto;
  s.label_every = 5;
  s.check_every = 10;
  s.hand_over_force_rmse = 0.1;
  s.label_uncertainty = 0.3;
  s.take_over_uncertainty = 0.8;
  return s;
}

// The thresholds criterion's view of a label: validated or not, the validation force RMSE and the
// largest force uncertainty; true when the model takes over.
bool hands_over(OnTheFlyPolicy& policy, bool validated, double validation_force_rmse,
                double max_uncertainty) {
  LabelAssessment assessment;
  assessment.validated = validated;
  assessment.validation_force_rmse = validation_force_rmse;
  assessment.max_uncertainty = max_uncertainty;
  return policy.after_label(assessment) == LabelDecision::ModelDrives;
}

DriveMeasurement spread(double max_force_spread) {
  DriveMeasurement m;
  m.max_force_spread = max_force_spread;
  return m;
}

DriveMeasurement predicted(double force_error, double energy_error) {
  DriveMeasurement m;
  m.predicted_force_error = force_error;
  m.predicted_energy_error = energy_error;
  return m;
}

void expect_invalid(const PolicySettings& settings, const std::string& fragment) {
  try {
    check_policy_settings(settings);
    FAIL() << "accepted settings that should name: " << fragment;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(OnTheFlyPolicy, DriveModesParseAndPrint) {
  for (const DriveMode mode : {DriveMode::Reference, DriveMode::Model, DriveMode::Auto})
    EXPECT_EQ(parse_drive_mode(to_string(mode)), mode);
  try {
    parse_drive_mode("both");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown drive 'both'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("reference, model or auto"), std::string::npos);
  }
}

TEST(OnTheFlyPolicy, SettingsOutOfRangeAreNamed) {
  PolicySettings s;
  s.label_every = 0;
  // Ranges are stated as fix otf/train states every range (src/keywords.h), once, here.
  expect_invalid(s, "every must be an integer in [1, ");
  s = PolicySettings{};
  s.mode = DriveMode::Auto;
  expect_invalid(s, "drive auto needs accuracy");
  s = auto_settings();
  s.take_over_uncertainty = 0.2;
  expect_invalid(s, "uncertainty <= take_over");
  s = PolicySettings{};
  s.check_every = 3;
  expect_invalid(s, "apply to drive auto only");
  s = PolicySettings{};
  s.hand_over_force_rmse = 0.1;
  expect_invalid(s, "apply to drive auto only");
  EXPECT_THROW(OnTheFlyPolicy{s}, std::invalid_argument);
  EXPECT_NO_THROW(check_policy_settings(auto_settings()));
}

TEST(OnTheFlyPolicy, FixedModesLabelOnScheduleAndNeverSwitch) {
  for (const DriveMode mode : {DriveMode::Reference, DriveMode::Model}) {
    PolicySettings s;
    s.mode = mode;
    s.label_every = 3;
    OnTheFlyPolicy policy(s);
    const bool reference = mode == DriveMode::Reference;
    EXPECT_EQ(policy.reference_drives(), reference);
    int labels = 0, reference_force_steps = 0;
    for (int64_t step = 0; step <= 12; ++step) {
      const StepPlan plan = policy.plan_step(step);
      EXPECT_EQ(plan.label, step % 3 == 0) << "step " << step;
      EXPECT_FALSE(plan.check);
      EXPECT_EQ(plan.reference_forces, reference && step % 3 != 0) << "step " << step;
      labels += plan.label;
      reference_force_steps += plan.reference_forces;
      // Perfect errors never hand over in a fixed mode.
      EXPECT_FALSE(hands_over(policy, true, 0.0, 0.0));
      EXPECT_EQ(policy.reference_drives(), reference);
    }
    EXPECT_EQ(labels, 5);
    EXPECT_EQ(reference_force_steps, reference ? 8 : 0);
    EXPECT_EQ(policy.state().model_driven_steps, reference ? 0 : 13);
  }
}

TEST(OnTheFlyPolicy, AutoHandsOverOnlyWhenValidatedAndBothCriteriaHold) {
  OnTheFlyPolicy policy(auto_settings());
  EXPECT_TRUE(policy.reference_drives());
  ASSERT_TRUE(policy.plan_step(0).label);
  EXPECT_FALSE(hands_over(policy, false, 0.01, 0.01));   // not validated yet
  ASSERT_TRUE(policy.plan_step(5).label);
  EXPECT_FALSE(hands_over(policy, true, 0.2, 0.01));     // force error too large
  ASSERT_TRUE(policy.plan_step(10).label);
  EXPECT_FALSE(hands_over(policy, true, 0.05, 0.3));     // uncertainty not below the threshold
  EXPECT_TRUE(policy.reference_drives());
  ASSERT_TRUE(policy.plan_step(15).label);
  EXPECT_TRUE(hands_over(policy, true, 0.05, 0.29));
  EXPECT_FALSE(policy.reference_drives());
  EXPECT_EQ(policy.state().model_driven_steps, 0);        // step 15 was driven by the reference
}

TEST(OnTheFlyPolicy, AutoModelPhaseChecksOnCadenceLabelsAndTakesOver) {
  OnTheFlyPolicy policy(auto_settings());
  policy.plan_step(0);
  ASSERT_TRUE(hands_over(policy, true, 0.01, 0.01));
  int checks = 0;
  for (int64_t step = 1; step <= 29; ++step) {
    const StepPlan plan = policy.plan_step(step);
    EXPECT_FALSE(plan.label) << "the model phase labels only checked configurations";
    EXPECT_FALSE(plan.reference_forces);
    EXPECT_EQ(plan.check, step % 10 == 0) << "step " << step;
    if (!plan.check) continue;
    ++checks;
    const CheckOutcome calm = policy.after_check(step, spread(0.3));   // at the threshold: no label
    EXPECT_FALSE(calm.label);
  }
  EXPECT_EQ(checks, 2);
  EXPECT_EQ(policy.state().model_driven_steps, 29);

  ASSERT_TRUE(policy.plan_step(30).check);
  const CheckOutcome uncertain = policy.after_check(30, spread(0.5));
  EXPECT_TRUE(uncertain.label);
  EXPECT_FALSE(uncertain.reference_takes_over);
  EXPECT_FALSE(policy.reference_drives());
  EXPECT_EQ(policy.state().last_labelled_step, 30);
  EXPECT_EQ(policy.state().model_phase_labels, 1);

  ASSERT_TRUE(policy.plan_step(40).check);
  const CheckOutcome lost = policy.after_check(40, spread(0.9));
  EXPECT_TRUE(lost.label);
  EXPECT_TRUE(lost.reference_takes_over);
  EXPECT_TRUE(policy.reference_drives());
  EXPECT_EQ(policy.state().model_phase_labels, 2);
  // The reference drives again, and under drive auto each of its answers is learned: every step
  // is a label (whose answer also drives), not only every label_every-th.
  const StepPlan next = policy.plan_step(41);
  EXPECT_TRUE(next.label);
  EXPECT_FALSE(next.reference_forces);
  EXPECT_FALSE(next.check);
  EXPECT_TRUE(policy.plan_step(42).label);
}

PolicySettings accuracy_settings() {
  PolicySettings s;
  s.mode = DriveMode::Auto;
  s.label_every = 5;
  s.check_every = 10;
  s.target_force_error = 0.05;
  s.target_energy_error = 0.002;
  s.min_labels = 3;
  s.take_over_factor = 4.0;
  return s;
}

LabelAssessment assessed(double force_error, double energy_error, int64_t samples) {
  LabelAssessment a;
  a.validated = true;
  a.label_force_error = force_error;
  a.label_energy_error = energy_error;
  a.calibration_samples = samples;
  return a;
}

TEST(OnTheFlyPolicy, AccuracySettingsAreCheckedAndExclusiveWithThresholds) {
  EXPECT_NO_THROW(check_policy_settings(accuracy_settings()));
  PolicySettings s = accuracy_settings();
  s.target_energy_error = 0.0;
  // The range of each target, named as the keyword's value (issue 33: one rule, one message).
  expect_invalid(s, "accuracy <energy> must be a finite number in (0, ");
  s = accuracy_settings();
  s.label_uncertainty = 0.3;
  expect_invalid(s, "either accuracy or thresholds");
  s = accuracy_settings();
  s.take_over_factor = 2.0;
  expect_invalid(s, "take_over must be a finite number in (2, ");
  s = accuracy_settings();
  s.min_labels = 0;
  expect_invalid(s, "min_labels must be an integer in [1, ");
  s = accuracy_settings();
  s.mode = DriveMode::Reference;
  expect_invalid(s, "apply to drive auto only");
}

TEST(OnTheFlyPolicy, AccuracyHandsOverAfterEnoughCalibratedLabelsWithinTwiceTheTarget) {
  OnTheFlyPolicy policy(accuracy_settings());
  ASSERT_TRUE(policy.plan_step(0).label);
  // Not measured (the model had not been trained): nothing to decide.
  EXPECT_EQ(policy.after_label(assessed(-1.0, -1.0, 0)), LabelDecision::None);
  ASSERT_TRUE(policy.plan_step(5).label);
  // Accurate, but too few calibration samples.
  EXPECT_EQ(policy.after_label(assessed(0.01, 0.0001, 2)), LabelDecision::None);
  ASSERT_TRUE(policy.plan_step(10).label);
  // Enough samples, force error above twice the target (take_over 4 / 2).
  EXPECT_EQ(policy.after_label(assessed(0.11, 0.0001, 3)), LabelDecision::None);
  ASSERT_TRUE(policy.plan_step(15).label);
  // The energy error counts as well.
  EXPECT_EQ(policy.after_label(assessed(0.09, 0.0041, 4)), LabelDecision::None);
  EXPECT_TRUE(policy.reference_drives());
  ASSERT_TRUE(policy.plan_step(20).label);
  EXPECT_EQ(policy.after_label(assessed(0.1, 0.004, 5)), LabelDecision::ModelDrives);
  EXPECT_FALSE(policy.reference_drives());
}

TEST(OnTheFlyPolicy, AccuracyLabelsAboveTheTargetAndGivesBackAboveTakeOver) {
  OnTheFlyPolicy policy(accuracy_settings());
  policy.plan_step(0);
  ASSERT_EQ(policy.after_label(assessed(0.02, 0.0005, 3)), LabelDecision::ModelDrives);
  ASSERT_TRUE(policy.plan_step(10).check);
  CheckOutcome calm = policy.after_check(10, predicted(0.05, 0.002));  // at the targets
  EXPECT_FALSE(calm.label);
  ASSERT_TRUE(policy.plan_step(20).check);
  const CheckOutcome energy = policy.after_check(20, predicted(0.01, 0.0021));
  EXPECT_TRUE(energy.label);
  EXPECT_FALSE(energy.reference_takes_over);
  EXPECT_EQ(policy.state().model_phase_labels, 1);
  // The label came back worse than take_over x target: the reference drives.
  EXPECT_EQ(policy.after_label(assessed(0.21, 0.001, 4)), LabelDecision::ReferenceDrives);
  EXPECT_TRUE(policy.reference_drives());
  EXPECT_TRUE(policy.plan_step(21).label);  // each answer of the reference is learned
  ASSERT_TRUE(policy.plan_step(25).label);
  EXPECT_EQ(policy.after_label(assessed(0.08, 0.001, 5)), LabelDecision::ModelDrives);
  ASSERT_TRUE(policy.plan_step(30).check);
  const CheckOutcome lost = policy.after_check(30, predicted(0.2001, 0.0));
  EXPECT_TRUE(lost.label);
  EXPECT_TRUE(lost.reference_takes_over);
  EXPECT_TRUE(policy.reference_drives());
  // Its label shows the prediction was pessimistic: the model drives on at once.
  EXPECT_EQ(policy.after_label(assessed(0.06, 0.001, 6)), LabelDecision::ModelDrives);
  EXPECT_EQ(policy.state().model_phase_labels, 2);
}

TEST(OnTheFlyPolicy, AnUnsureModelIsWatchedEveryStepAndLabelledWhenItGetsWorse) {
  OnTheFlyPolicy policy(accuracy_settings());
  policy.plan_step(0);
  ASSERT_EQ(policy.after_label(assessed(0.02, 0.0005, 3)), LabelDecision::ModelDrives);
  EXPECT_FALSE(policy.plan_step(1).check);  // sure so far: checks every check_every steps
  ASSERT_TRUE(policy.plan_step(10).check);
  EXPECT_TRUE(policy.after_check(10, predicted(0.08, 0.0)).label);
  EXPECT_TRUE(policy.state().check_next_step);
  // Watched on the next steps; above the accuracy but not 1.25 x worse than at the label: no call.
  ASSERT_TRUE(policy.plan_step(11).check);
  EXPECT_FALSE(policy.after_check(11, predicted(0.099, 0.0)).label);
  ASSERT_TRUE(policy.plan_step(12).check);
  // Distinctly worse: labelled, and the floor moves up.
  EXPECT_TRUE(policy.after_check(12, predicted(0.101, 0.0)).label);
  EXPECT_DOUBLE_EQ(policy.state().watch_floor, 0.101);
  ASSERT_TRUE(policy.plan_step(13).check);
  EXPECT_FALSE(policy.after_check(13, predicted(0.12, 0.0)).label);
  // Within the accuracy again: back to the schedule.
  ASSERT_TRUE(policy.plan_step(14).check);
  EXPECT_FALSE(policy.after_check(14, predicted(0.04, 0.0)).label);
  EXPECT_FALSE(policy.state().check_next_step);
  EXPECT_FALSE(policy.plan_step(15).check);
  // A scheduled check labels above the accuracy whatever the floor.
  ASSERT_TRUE(policy.plan_step(20).check);
  EXPECT_TRUE(policy.after_check(20, predicted(0.06, 0.0)).label);
  EXPECT_EQ(policy.state().model_phase_labels, 3);
}

// A model fitted in closed form (PosteriorAccuracy) whose fit leaves a noise above half the
// accuracy verifies a prediction within the accuracy with a label, once it has driven unlabelled
// for as long as the labelled history before (from the first step to the last label, at least
// check_every): doubling intervals.
TEST(OnTheFlyPolicy, AClosedFormModelOfMarginalFitVerifiesItsPredictionsAtDoublingIntervals) {
  PolicySettings settings = accuracy_settings();
  settings.learner_fits_each_label = true;
  OnTheFlyPolicy policy(settings);
  ASSERT_TRUE(policy.plan_step(0).label);
  LabelAssessment fitted;
  fitted.trained = true;
  ASSERT_EQ(policy.after_label(fitted), LabelDecision::ModelDrives);
  const auto fit_noise = [](double energy_noise) {
    DriveMeasurement m = predicted(0.01, 0.0015);
    m.fit_energy_noise = energy_noise;
    return m;
  };
  std::vector<int64_t> verified;
  for (int64_t step = 1; step <= 400; ++step) {
    if (!policy.plan_step(step).check) continue;
    // Marginal (energy noise above half the accuracy) but on steps 150-199.
    const bool marginal = step < 150 || step >= 200;
    const CheckOutcome outcome = policy.after_check(step, fit_noise(marginal ? 0.0011 : 0.0009));
    EXPECT_EQ(outcome.label, outcome.verification) << step;
    EXPECT_FALSE(outcome.check_next_step) << step;
    if (outcome.verification) verified.push_back(step);
  }
  // 10 (at least check_every), 20, 40, 80; at 160 the fit is not marginal: the next check that
  // is, 200; then 400.
  EXPECT_EQ(verified, (std::vector<int64_t>{10, 20, 40, 80, 200, 400}));
  EXPECT_EQ(policy.state().model_phase_labels, 6);
  EXPECT_EQ(policy.state().first_counted_step, 0);
  // A fit that explains its labels well is never verified; a continued run spaces from its own
  // first step.
  OnTheFlyPolicy good_fit(settings);
  good_fit.plan_step(1000);
  ASSERT_EQ(good_fit.after_label(fitted), LabelDecision::ModelDrives);
  EXPECT_EQ(good_fit.state().first_counted_step, 1000);
  for (int64_t step = 1001; step <= 2000; ++step) {
    if (good_fit.plan_step(step).check) {
      EXPECT_FALSE(good_fit.after_check(step, fit_noise(0.0009)).label) << step;
    }
  }
  ASSERT_TRUE(good_fit.plan_step(2010).check);
  EXPECT_TRUE(good_fit.after_check(2010, fit_noise(0.0011)).verification);
  // A warm start's journal covered 300 steps of an earlier run: the first verification waits
  // that long.
  OnTheFlyPolicy warm(settings);
  warm.inherit_labelled_history(300);
  std::vector<int64_t> warm_verified;
  for (int64_t step = 0; step <= 1000; ++step) {
    const StepPlan plan = warm.plan_step(step);
    if (plan.label) {
      ASSERT_EQ(warm.after_label(fitted), LabelDecision::ModelDrives);
    }
    if (plan.check && warm.after_check(step, fit_noise(0.0011)).verification) {
      warm_verified.push_back(step);
    }
  }
  EXPECT_EQ(warm_verified, (std::vector<int64_t>{300, 900}));
}

// A closed-form model's label whose error (predicted before it was learned) was above take_over x
// the accuracy shows the model far off where it drove: it is watched on every step for
// check_every steps after that label and labelled where it is unsure; a label below that is not
// followed so, and neither is any label under the neural committee's criterion.
TEST(OnTheFlyPolicy, AClosedFormModelFoundWrongByALabelIsWatchedUntilAnIntervalHasPassed) {
  PolicySettings settings = accuracy_settings();
  settings.learner_fits_each_label = true;
  OnTheFlyPolicy policy(settings);
  LabelAssessment fitted;
  fitted.trained = true;
  ASSERT_TRUE(policy.plan_step(0).label);
  ASSERT_EQ(policy.after_label(fitted), LabelDecision::ModelDrives);  // nothing measured yet
  EXPECT_FALSE(policy.plan_step(1).check);
  ASSERT_TRUE(policy.plan_step(10).check);
  DriveMeasurement zero_forces_learned = predicted(0.0, 0.0);
  zero_forces_learned.learned_forces = false;
  ASSERT_TRUE(policy.after_check(10, zero_forces_learned).label);
  LabelAssessment wrong = fitted;
  wrong.label_force_error = 2.4;  // the model's forces were 2.4 eV/A off at step 10
  wrong.label_energy_error = 0.0001;
  EXPECT_EQ(policy.after_label(wrong), LabelDecision::None);
  EXPECT_EQ(policy.state().watch_until, 20);
  EXPECT_EQ(policy.earliest_label_step_after(10), 11);
  DriveMeasurement sure = predicted(0.01, 0.0001);
  sure.learned_forces = true;
  DriveMeasurement unsure = predicted(0.3, 0.0001);
  unsure.learned_forces = true;
  // Sure: no label; and one that only spreads wider than the labels waits for the schedule.
  ASSERT_TRUE(policy.plan_step(11).check);
  EXPECT_FALSE(policy.after_check(11, sure).label);
  ASSERT_TRUE(policy.plan_step(12).check);
  DriveMeasurement wider = sure;
  wider.descriptor_spread_ratio = 3.0;
  wider.descriptor_spread_limit = 1.4;
  ASSERT_TRUE(wider.extrapolates());
  EXPECT_FALSE(policy.after_check(12, wider).label);
  // Unsure: labelled; within the accuracy, so no new window.
  ASSERT_TRUE(policy.plan_step(13).check);
  EXPECT_TRUE(policy.after_check(13, unsure).label);
  LabelAssessment right = fitted;
  right.label_force_error = 0.19;  // above the accuracy 0.05, below take_over 4 x it
  right.label_energy_error = 0.0001;
  EXPECT_EQ(policy.after_label(right), LabelDecision::None);
  EXPECT_EQ(policy.state().watch_until, 20);
  for (int64_t step = 14; step <= 20; ++step) {
    ASSERT_TRUE(policy.plan_step(step).check) << step;
    EXPECT_FALSE(policy.after_check(step, sure).label) << step;
  }
  EXPECT_FALSE(policy.plan_step(21).check);
  EXPECT_EQ(policy.earliest_label_step_after(21), 30);
  // The neural committee's criterion never watches after a label.
  OnTheFlyPolicy neural(accuracy_settings());
  neural.plan_step(0);
  ASSERT_EQ(neural.after_label(assessed(0.02, 0.0005, 3)), LabelDecision::ModelDrives);
  ASSERT_TRUE(neural.plan_step(10).check);
  ASSERT_TRUE(neural.after_check(10, predicted(0.08, 0.0)).label);
  neural.after_label(assessed(0.9, 0.0005, 4));
  EXPECT_EQ(neural.state().watch_until, -1);
}

// Walkers skip their rounds before earliest_label_step_after: no step before it may label or
// check, whoever drives, and it is not later than the next one that does.
TEST(OnTheFlyPolicy, NoStepBeforeTheEarliestLabelStepLabelsOrChecks) {
  OnTheFlyPolicy policy(accuracy_settings());
  int64_t earliest = 0;
  int64_t first_planned_after = -1;
  for (int64_t step = 0; step <= 40; ++step) {
    const StepPlan plan = policy.plan_step(step);
    const bool planned = plan.label || plan.check;
    if (step < earliest) {
      EXPECT_FALSE(planned) << "step " << step << " before " << earliest;
    }
    if (planned && first_planned_after < 0) first_planned_after = step;
    if (plan.label && step == 0) policy.after_label(assessed(0.02, 0.0005, 3));  // model drives
    // Unsure at step 10 (watched every step), sure again at 13.
    if (plan.check) policy.after_check(step, predicted(step >= 10 && step < 13 ? 0.08 : 0.01, 0.0));
    earliest = policy.earliest_label_step_after(step);
    if (step == 0) {
      EXPECT_EQ(earliest, 10) << "the model drives: the next scheduled check";
    }
    if (step == 10 || step == 11) {
      EXPECT_EQ(earliest, step + 1) << "watched";
    }
    if (step == 13) {
      EXPECT_EQ(earliest, 20) << "back to the schedule";
    }
  }
  // While the reference drives, every step asks it for forces.
  OnTheFlyPolicy reference_phase(accuracy_settings());
  reference_phase.plan_step(0);
  EXPECT_EQ(reference_phase.earliest_label_step_after(0), 1);
  // A fixed mode labels on its schedule (label_every 5).
  PolicySettings fixed;
  fixed.mode = DriveMode::Model;
  fixed.label_every = 5;
  OnTheFlyPolicy model_mode(fixed);
  model_mode.plan_step(3);
  EXPECT_EQ(model_mode.earliest_label_step_after(3), 5);
  EXPECT_EQ(model_mode.earliest_label_step_after(5), 10);
}

TEST(OnTheFlyPolicy, DriveAutoLearnsEachAnswerOfTheReferenceTheFixedModesTheirSchedule) {
  // Issue 39: under drive auto the reference drives only to teach the model, and each of its
  // answers costs a call (an ab initio one per step), so every step it drives is a label.
  OnTheFlyPolicy learner(accuracy_settings());  // label_every 5
  for (int64_t step = 0; step < 7; ++step) {
    const StepPlan plan = learner.plan_step(step);
    EXPECT_TRUE(plan.label) << "step " << step;
    EXPECT_FALSE(plan.reference_forces) << "step " << step;
  }
  // A repeated step (setup() of the next run) is not labelled twice.
  EXPECT_FALSE(learner.plan_step(6).label);
  // drive reference keeps its schedule: the reference's forces drive every step, every
  // label_every-th is learned.
  PolicySettings reference_settings;
  reference_settings.mode = DriveMode::Reference;
  reference_settings.label_every = 5;
  OnTheFlyPolicy fixed(reference_settings);
  for (int64_t step = 0; step < 11; ++step) {
    const StepPlan plan = fixed.plan_step(step);
    EXPECT_EQ(plan.label, step % 5 == 0) << "step " << step;
    EXPECT_EQ(plan.reference_forces, step % 5 != 0) << "step " << step;
  }
}

TEST(OnTheFlyPolicy, ARefusedLabelOfTheModelsConfigurationGivesTheMdBackToTheReference) {
  OnTheFlyPolicy policy(accuracy_settings());
  policy.plan_step(0);
  ASSERT_EQ(policy.after_label(assessed(0.02, 0.0005, 3)), LabelDecision::ModelDrives);
  ASSERT_TRUE(policy.plan_step(10).check);
  EXPECT_TRUE(policy.after_check(10, predicted(0.08, 0.0)).label);
  EXPECT_TRUE(policy.after_refused_label());
  EXPECT_TRUE(policy.reference_drives());
  EXPECT_FALSE(policy.state().check_next_step);
  EXPECT_FALSE(policy.after_refused_label());  // already driving
  const StepPlan next = policy.plan_step(11);
  EXPECT_TRUE(next.label);  // the reference drives: its answer is learned
  EXPECT_FALSE(next.check);
  // The fixed modes keep their choice.
  PolicySettings model;
  model.mode = DriveMode::Model;
  OnTheFlyPolicy fixed(model);
  EXPECT_FALSE(fixed.after_refused_label());
  EXPECT_FALSE(fixed.reference_drives());
}

TEST(OnTheFlyPolicy, ARepeatedStepIsNeitherCountedNorLabelledTwice) {
  PolicySettings s;
  s.mode = DriveMode::Model;
  s.label_every = 2;
  OnTheFlyPolicy policy(s);
  const StepPlan first = policy.plan_step(4);
  EXPECT_TRUE(first.label);
  EXPECT_FALSE(first.repeated_step);
  const StepPlan again = policy.plan_step(4);    // setup() of the next run
  EXPECT_TRUE(again.repeated_step);
  EXPECT_FALSE(again.label);
  EXPECT_EQ(policy.state().model_driven_steps, 1);

  OnTheFlyPolicy automatic(auto_settings());
  automatic.plan_step(0);
  hands_over(automatic, true, 0.0, 0.0);
  EXPECT_TRUE(automatic.plan_step(10).check);
  EXPECT_FALSE(automatic.plan_step(10).check);
}

TEST(OnTheFlyPolicy, RestoredStateContinuesExactly) {
  OnTheFlyPolicy original(auto_settings());
  OnTheFlyPolicy copy(auto_settings());
  for (int64_t step = 0; step <= 60; ++step) {
    const StepPlan plan = original.plan_step(step);
    if (plan.label) hands_over(original, true, step >= 20 ? 0.01 : 1.0, 0.1);
    if (plan.check) original.after_check(step, spread(step == 50 ? 0.9 : 0.5));
  }
  copy.restore(original.state());
  for (int64_t step = 61; step <= 120; ++step) {
    const StepPlan a = original.plan_step(step), b = copy.plan_step(step);
    EXPECT_EQ(a.label, b.label);
    EXPECT_EQ(a.check, b.check);
    EXPECT_EQ(a.reference_forces, b.reference_forces);
    if (a.label) {
      EXPECT_EQ(hands_over(original, true, 0.01, 0.1), hands_over(copy, true, 0.01, 0.1));
    }
    if (a.check) {
      const CheckOutcome x = original.after_check(step, spread(0.5)), y = copy.after_check(step, spread(0.5));
      EXPECT_EQ(x.label, y.label);
    }
  }
  const PolicyState& a = original.state();
  const PolicyState& b = copy.state();
  EXPECT_EQ(a.reference_drives, b.reference_drives);
  EXPECT_EQ(a.last_labelled_step, b.last_labelled_step);
  EXPECT_EQ(a.last_checked_step, b.last_checked_step);
  EXPECT_EQ(a.model_driven_steps, b.model_driven_steps);
  EXPECT_EQ(a.model_phase_labels, b.model_phase_labels);
  EXPECT_EQ(a.first_counted_step, b.first_counted_step);
  EXPECT_EQ(a.inherited_history, b.inherited_history);
  EXPECT_GT(a.model_phase_labels, 0);
}

TEST(OnTheFlyPolicy, AFixedModeGivenAgainKeepsItsOwnDriver) {
  PolicyState saved;
  saved.reference_drives = false;   // an auto run whose model drove
  saved.last_labelled_step = 40;
  PolicySettings s;
  s.mode = DriveMode::Reference;
  OnTheFlyPolicy policy(s);
  policy.restore(saved);
  EXPECT_TRUE(policy.reference_drives());
  EXPECT_EQ(policy.state().last_labelled_step, 40);
}

TEST(OnTheFlyPolicy, TheDefaultAccuracyIsFiftyMeVPerAngstromAndTwoMeVPerAtomInAnyUnits) {
  PolicySettings metal;
  metal.mode = DriveMode::Auto;
  set_default_accuracy(metal, "metal");
  EXPECT_DOUBLE_EQ(metal.target_force_error, 0.05);
  EXPECT_DOUBLE_EQ(metal.target_energy_error, 0.002);
  EXPECT_NO_THROW(check_policy_settings(metal));
  PolicySettings real;
  set_default_accuracy(real, "real");    // kcal/mol: 1 eV = 23.0605 kcal/mol
  EXPECT_NEAR(real.target_force_error, 0.05 * 23.0605, 1e-3);
  EXPECT_NEAR(real.target_energy_error, 0.002 * 23.0605, 1e-4);
  PolicySettings electron;
  set_default_accuracy(electron, "electron");    // Hartree/Bohr and Hartree
  EXPECT_NEAR(electron.target_force_error, 0.05 / 27.211386 * 0.529177, 1e-7);
  PolicySettings lj;
  try {
    set_default_accuracy(lj, "lj");
    FAIL() << "lj has no default accuracy";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("units lj have no physical scale"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("accuracy <force> <energy>"), std::string::npos);
  }
}

}  // namespace
}  // namespace otf

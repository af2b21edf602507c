// drive auto's two criteria behind one interface (training/drive_criterion.h): what each judges,
// what it keeps from a prediction, and the lines it writes; the policy's state machine is tested
// in test_on_the_fly_policy.cpp.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "drive_criterion.h"
#include "on_the_fly_policy.h"

namespace otf {
namespace {

PolicySettings auto_with(double force, double energy) {
  PolicySettings s;
  s.mode = DriveMode::Auto;
  s.target_force_error = force;
  s.target_energy_error = energy;
  return s;
}

TEST(DriveCriterion, TheFixedModesHaveNone) {
  PolicySettings s;
  s.mode = DriveMode::Model;
  EXPECT_EQ(make_drive_criterion(s), nullptr);
  s.mode = DriveMode::Reference;
  EXPECT_EQ(make_drive_criterion(s), nullptr);
  EXPECT_EQ(OnTheFlyPolicy(s).criterion(), nullptr);
}

TEST(DriveCriterion, ThresholdsJudgeScheduledLabelsOnTheRawSpread) {
  PolicySettings s;
  s.mode = DriveMode::Auto;
  s.hand_over_force_rmse = 0.1;
  s.label_uncertainty = 0.3;
  s.take_over_uncertainty = 0.8;
  const auto criterion = make_drive_criterion(s);
  ASSERT_NE(criterion, nullptr);
  EXPECT_EQ(criterion->describe(), "thresholds 0.1 0.3 0.8");
  EXPECT_FALSE(criterion->compares_prediction_with_label());
  EXPECT_EQ(criterion->label_fit_force_error(), 0.0);
  EXPECT_TRUE(criterion->judges_label(false, false));
  EXPECT_FALSE(criterion->judges_label(true, true));
  DriveMeasurement m;
  m.max_force_spread = 0.5;
  m.predicted_force_error = 9.0;
  EXPECT_EQ(criterion->checked_value(m), 0.5);
  const CheckOutcome outcome = criterion->judge_check(m);
  EXPECT_TRUE(outcome.label);
  EXPECT_FALSE(outcome.reference_takes_over);
  m.max_force_spread = 0.9;
  EXPECT_EQ(criterion->explain_take_over(m),
            "force uncertainty 0.9 > 0.8: the reference drives until the model is good enough "
            "again");
  LabelAssessment a;
  a.validated = true;
  a.validation_force_rmse = 0.05;
  a.max_uncertainty = 0.2;
  EXPECT_EQ(criterion->judge_label(a, true), LabelDecision::ModelDrives);
  EXPECT_EQ(criterion->judge_label(a, false), LabelDecision::None);
  EXPECT_EQ(criterion->explain_label_decision(LabelDecision::ModelDrives, a),
            "the model drives (validation force RMSE 0.05 < 0.1, force uncertainty 0.2 < 0.3)");
  EXPECT_NO_THROW(criterion->check_committee_size(1));
}

TEST(DriveCriterion, AccuracyComparesPredictionsAndNeedsACommittee) {
  PolicySettings s = auto_with(0.05, 0.002);
  const auto criterion = make_drive_criterion(s);
  ASSERT_NE(criterion, nullptr);
  EXPECT_EQ(criterion->describe(), "accuracy 0.05 0.002");
  set_default_accuracy(s, "metal");
  EXPECT_EQ(make_drive_criterion(s)->describe(),
            "accuracy 0.05 0.002 (the default accuracy in units metal)");
  EXPECT_TRUE(criterion->compares_prediction_with_label());
  EXPECT_DOUBLE_EQ(criterion->label_fit_force_error(), 0.025);
  EXPECT_FALSE(criterion->judges_label(false, false));
  EXPECT_TRUE(criterion->judges_label(true, true));
  DriveMeasurement m;
  m.max_force_spread = 9.0;
  m.predicted_force_error = 0.3;
  EXPECT_EQ(criterion->checked_value(m), 0.3);
  EXPECT_TRUE(criterion->judge_check(m).reference_takes_over);  // 0.3 > 4 x 0.05
  EXPECT_EQ(criterion->explain_take_over(m),
            "predicted force error 0.3 > 0.2 (take_over x accuracy): the reference drives until "
            "the model is good enough again");
  EXPECT_THROW(criterion->check_committee_size(1), std::invalid_argument);
  EXPECT_NO_THROW(criterion->check_committee_size(2));
}

// A closed-form model's posterior accuracy verifies, now and then, predictions within the accuracy
// of a fit whose noise on its own labels is above half of it (OnTheFlyPolicy spaces them).
TEST(DriveCriterion, PosteriorAccuracyVerifiesAFitWhoseNoiseIsAboveHalfTheAccuracy) {
  PolicySettings s = auto_with(0.05, 0.002);
  s.learner_fits_each_label = true;
  const auto posterior = make_drive_criterion(s);
  DriveMeasurement m;
  m.predicted_force_error = 0.04;
  m.predicted_energy_error = 0.0015;
  m.fit_force_noise = 0.02;
  m.fit_energy_noise = 0.0009;
  EXPECT_FALSE(posterior->judge_check(m).label);
  EXPECT_FALSE(posterior->worth_verifying(m));  // the fit explains its labels well
  m.fit_energy_noise = 0.0011;
  EXPECT_TRUE(posterior->worth_verifying(m));
  m.fit_energy_noise = 0.0;
  m.fit_force_noise = 0.09;  // above the accuracy itself: its reducible part does not label
  m.irreducible_force_error = 0.09;
  m.predicted_force_error = 0.1;
  EXPECT_FALSE(posterior->judge_check(m).label);
  EXPECT_TRUE(posterior->worth_verifying(m));
  m.learned_forces = false;  // a fit to a perfect crystal's zero forces is labelled as such
  EXPECT_FALSE(posterior->worth_verifying(m));
  // The neural committee's criterion labels from many predictions: it verifies nothing.
  s.learner_fits_each_label = false;
  m.learned_forces = true;
  EXPECT_FALSE(make_drive_criterion(s)->worth_verifying(m));
}

}  // namespace
}  // namespace otf

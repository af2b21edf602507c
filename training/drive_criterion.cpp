#include "drive_criterion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "keywords.h"
#include "on_the_fly_policy.h"

namespace otf {
namespace {

std::string formatted(const char* format, double a, double b, double c = 0.0, double d = 0.0) {
  char text[256];
  std::snprintf(text, sizeof(text), format, a, b, c, d);
  return text;
}

}  // namespace

UncertaintyThresholds::UncertaintyThresholds(double hand_over_force_rmse, double label_uncertainty,
                                             double take_over_uncertainty) :
    hand_over_force_rmse_(hand_over_force_rmse),
    label_uncertainty_(label_uncertainty),
    take_over_uncertainty_(take_over_uncertainty) {}

std::string UncertaintyThresholds::describe() const {
  return "thresholds " + format_number(hand_over_force_rmse_) + " " +
         format_number(label_uncertainty_) + " " + format_number(take_over_uncertainty_);
}

LabelDecision UncertaintyThresholds::judge_label(const LabelAssessment& a,
                                                 bool reference_drives) const {
  if (!reference_drives || !a.validated) return LabelDecision::None;
  return a.validation_force_rmse < hand_over_force_rmse_ && a.max_uncertainty < label_uncertainty_
             ? LabelDecision::ModelDrives
             : LabelDecision::None;
}

CheckOutcome UncertaintyThresholds::judge_check(const DriveMeasurement& m) const {
  CheckOutcome outcome;
  if (m.max_force_spread <= label_uncertainty_) return outcome;
  outcome.label = true;
  outcome.reference_takes_over = m.max_force_spread > take_over_uncertainty_;
  return outcome;
}

std::string UncertaintyThresholds::explain_label_decision(LabelDecision /*decision*/,
                                                          const LabelAssessment& a) const {
  return formatted("the model drives (validation force RMSE %.4g < %.4g, force uncertainty %.4g "
                   "< %.4g)",
                   a.validation_force_rmse, hand_over_force_rmse_, a.max_uncertainty,
                   label_uncertainty_);
}

std::string UncertaintyThresholds::explain_take_over(const DriveMeasurement& m) const {
  return formatted("force uncertainty %.4g > %.4g: the reference drives until the model is good "
                   "enough again",
                   m.max_force_spread, take_over_uncertainty_);
}

CalibratedAccuracy::CalibratedAccuracy(double target_force_error, double target_energy_error,
                                       int64_t min_labels, double take_over_factor,
                                       std::string default_units) :
    target_force_error_(target_force_error),
    target_energy_error_(target_energy_error),
    min_labels_(min_labels),
    take_over_factor_(take_over_factor),
    default_units_(std::move(default_units)) {}

namespace {

// "accuracy F E", and where the input named none, whose default it is.
std::string accuracy_description(double force, double energy, const std::string& default_units) {
  return formatted("accuracy %.6g %.6g", force, energy) +
         (default_units.empty() ? std::string()
                                : " (the default accuracy in units " + default_units + ")");
}

}  // namespace

std::string CalibratedAccuracy::describe() const {
  return accuracy_description(target_force_error_, target_energy_error_, default_units_);
}

LabelDecision CalibratedAccuracy::judge_label(const LabelAssessment& a,
                                              bool reference_drives) const {
  if (a.label_force_error < 0.0) return LabelDecision::None;
  if (reference_drives) {
    const double factor = hand_over_factor();
    return a.calibration_samples >= min_labels_ &&
                   a.label_force_error <= factor * target_force_error_ &&
                   a.label_energy_error <= factor * target_energy_error_
               ? LabelDecision::ModelDrives
               : LabelDecision::None;
  }
  return a.label_force_error > take_over_factor_ * target_force_error_
             ? LabelDecision::ReferenceDrives
             : LabelDecision::None;
}

CheckOutcome CalibratedAccuracy::judge_check(const DriveMeasurement& m) const {
  CheckOutcome outcome;
  if (m.predicted_force_error <= target_force_error_ &&
      m.predicted_energy_error <= target_energy_error_)
    return outcome;
  outcome.label = true;
  outcome.reference_takes_over = m.predicted_force_error > take_over_factor_ * target_force_error_;
  // Predicted above the accuracy: watched every step until it is within it again.
  outcome.check_next_step = true;
  return outcome;
}

std::string CalibratedAccuracy::explain_label_decision(LabelDecision decision,
                                                       const LabelAssessment& a) const {
  if (decision == LabelDecision::ModelDrives)
    return formatted("the model drives (its errors on the last label before learning it: force "
                     "%.4g <= %.4g, energy %.4g <= %.4g per atom)",
                     a.label_force_error, hand_over_factor() * target_force_error_,
                     a.label_energy_error, hand_over_factor() * target_energy_error_);
  return formatted("the model's force error on this label was %.4g > %.4g (take_over x "
                   "accuracy): the reference drives until the model is good enough again",
                   a.label_force_error, take_over_factor_ * target_force_error_);
}

std::string CalibratedAccuracy::explain_take_over(const DriveMeasurement& m) const {
  return formatted("predicted force error %.4g > %.4g (take_over x accuracy): the reference "
                   "drives until the model is good enough again",
                   m.predicted_force_error, take_over_factor_ * target_force_error_);
}

void CalibratedAccuracy::check_committee_size(int64_t committee_size) const {
  if (committee_size < 2)
    throw std::invalid_argument("drive auto accuracy needs a committee of at least 2 members "
                                "(the model spec's committee_size): their spread is what "
                                "predicts the error");
}

PosteriorAccuracy::PosteriorAccuracy(double target_force_error, double target_energy_error,
                                     double take_over_factor, std::string default_units) :
    target_force_error_(target_force_error),
    target_energy_error_(target_energy_error),
    take_over_factor_(take_over_factor),
    default_units_(std::move(default_units)) {}

std::string PosteriorAccuracy::describe() const {
  return accuracy_description(target_force_error_, target_energy_error_, default_units_) +
         ", judged by the posterior of a model fitted in closed form";
}

LabelDecision PosteriorAccuracy::judge_label(const LabelAssessment& assessment,
                                             bool reference_drives) const {
  return reference_drives && assessment.trained ? LabelDecision::ModelDrives : LabelDecision::None;
}

namespace {

// Whether a predicted error asks for a label: above the target, and, when the irreducible part
// alone is already above it, with a reducible part above it too.
bool label_due(double predicted, double irreducible, double target) {
  if (predicted <= target) return false;
  if (irreducible < target) return true;
  return std::sqrt(std::max(predicted * predicted - irreducible * irreducible, 0.0)) > target;
}

}  // namespace

CheckOutcome PosteriorAccuracy::judge_check(const DriveMeasurement& m) const {
  CheckOutcome outcome;
  // Fitted to zero forces only, the evidence explains them with vanishing weights and a tight
  // prior: the posterior is confident without reason, so the first check asks for forces.
  // A configuration outside the labelled ones is where a Bayesian linear model's posterior is
  // least to be trusted (its noise was estimated on the labels): learn it.
  const bool unsure =
      label_due(m.predicted_force_error, m.irreducible_force_error, target_force_error_) ||
      label_due(m.predicted_energy_error, m.irreducible_energy_error, target_energy_error_);
  outcome.label = !m.learned_forces || m.extrapolates() || unsure;
  // Watched every step while its posterior is above the accuracy; a label for forces or for an
  // extrapolation is learned completely and says nothing about the next step.
  outcome.check_next_step = unsure && m.learned_forces;
  return outcome;
}

bool PosteriorAccuracy::worth_verifying(const DriveMeasurement& m) const {
  constexpr double kMarginalFraction = 0.5;
  return m.learned_forces && (m.fit_force_noise > kMarginalFraction * target_force_error_ ||
                              m.fit_energy_noise > kMarginalFraction * target_energy_error_);
}

bool PosteriorAccuracy::label_shows_model_wrong(const LabelAssessment& a) const {
  return a.label_force_error > take_over_factor_ * target_force_error_ ||
         a.label_energy_error > take_over_factor_ * target_energy_error_;
}

std::string PosteriorAccuracy::explain_label_decision(LabelDecision /*decision*/,
                                                      const LabelAssessment& /*assessment*/) const {
  return "the model drives (fitted in closed form to the labels so far; each configuration it "
         "is unsure of is labelled and learned at once)";
}

std::string PosteriorAccuracy::explain_take_over(const DriveMeasurement& /*measurement*/) const {
  return "the reference does not take over: a label is learned completely at once";
}

void PosteriorAccuracy::check_committee_size(int64_t committee_size) const {
  if (committee_size < 2)
    throw std::invalid_argument("drive auto accuracy needs a committee of at least 2 members "
                                "(the model spec's committee_size): for a bayesian-linear model "
                                "they are the posterior draws whose spread is its uncertainty");
}

std::shared_ptr<const DriveCriterion> make_drive_criterion(const PolicySettings& s) {
  if (s.mode != DriveMode::Auto) return nullptr;
  if (s.by_accuracy() && s.learner_fits_each_label)
    return std::make_shared<PosteriorAccuracy>(s.target_force_error, s.target_energy_error,
                                               s.take_over_factor, s.default_accuracy_units);
  if (s.by_accuracy())
    return std::make_shared<CalibratedAccuracy>(s.target_force_error, s.target_energy_error,
                                                s.min_labels, s.take_over_factor,
                                                s.default_accuracy_units);
  return std::make_shared<UncertaintyThresholds>(s.hand_over_force_rmse, s.label_uncertainty,
                                                 s.take_over_uncertainty);
}

}  // namespace otf

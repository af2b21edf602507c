// Under drive auto, what says that the model is good enough to drive the MD and which of the
// configurations it then meets need a label: one implementation per criterion (docs/design.md §9:
// uncertainty thresholds; §13: calibrated accuracy). A criterion only judges; the on-the-fly
// policy (on_the_fly_policy.h) keeps who drives, and the trainer measures. A new criterion is a
// new class here and a line in make_drive_criterion, not an edit of the trainer's branches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace otf {

struct PolicySettings;

// The committee on one configuration, as the trainer measured it.
struct DriveMeasurement {
  double max_force_spread = 0.0;        // largest per-atom force uncertainty (force units)
  double predicted_force_error = 0.0;   // calibrated, per component (accuracy criterion only)
  double predicted_energy_error = 0.0;  // calibrated, per atom (accuracy criterion only)
  // The part of the predicted errors that no label removes (a model fitted in closed form: the
  // noise its fit left, calibrated; 0 otherwise).
  double irreducible_force_error = 0.0;
  double irreducible_energy_error = 0.0;
  // The noise the fit left on its own labels, uncalibrated (a model fitted in closed form; 0
  // otherwise): the force per component and the energy per atom that the model class does not
  // explain.
  double fit_force_noise = 0.0;
  double fit_energy_noise = 0.0;
  // The model has learned a label with forces (not only a perfect crystal's, which are zero and
  // say nothing about how forces depend on the positions).
  bool learned_forces = true;
  // How much wider the configuration's descriptors spread than the labelled ones', and the limit
  // sampling noise explains (TrainingSession::descriptor_spread; 0: not measured).
  double descriptor_spread_ratio = 0.0;
  double descriptor_spread_limit = 0.0;
  bool extrapolates() const {
    return descriptor_spread_limit > 0.0 && descriptor_spread_ratio > descriptor_spread_limit;
  }
};

// What the trainer knows after learning a label.
struct LabelAssessment {
  bool trained = false;  // the model has been trained (or fitted) at least once
  bool validated = false;
  double validation_force_rmse = 0.0;
  double max_uncertainty = 0.0;
  // The committee mean's errors on this label, predicted before it was learned (negative: not
  // measured, e.g. before the model was first trained), and how many labels have been measured
  // so (the calibration samples).
  double label_force_error = -1.0;
  double label_energy_error = -1.0;
  int64_t calibration_samples = 0;
};

// What a label asks of the policy.
enum class LabelDecision { None, ModelDrives, ReferenceDrives };

struct CheckOutcome {
  bool label = false;                 // the configuration needs a label
  bool reference_takes_over = false;  // so uncertain that the reference drives from now on
  // The model drives on but is unsure: check the next step too (on_the_fly_policy.h).
  bool check_next_step = false;
  // The label verifies a prediction within the accuracy (OnTheFlyPolicy::after_check).
  bool verification = false;
};

class DriveCriterion {
 public:
  virtual ~DriveCriterion() = default;

  // The criterion and its numbers as the input states them ("thresholds 0.1 0.15 0.5").
  virtual std::string describe() const = 0;
  // Whether the committee's prediction on a labelled configuration is kept and compared with the
  // label before the label is learned (the calibration of predicted errors).
  virtual bool compares_prediction_with_label() const = 0;
  // The number it compares on a checked configuration (the learning log's predicted error).
  virtual double checked_value(const DriveMeasurement& measurement) const = 0;
  // Whether a label is judged (judge_label): a scheduled one while the reference drives, or one a
  // check asked for (from_check); `learned` says whether it was learned.
  virtual bool judges_label(bool from_check, bool learned) const = 0;
  // After a label is learned: whether the model takes over (while the reference drives) or gives
  // the MD back (while the model drives).
  virtual LabelDecision judge_label(const LabelAssessment& assessment,
                                    bool reference_drives) const = 0;
  // While the model drives, on a checked configuration.
  virtual CheckOutcome judge_check(const DriveMeasurement& measurement) const = 0;
  // Log lines saying why a decision was taken.
  virtual std::string explain_label_decision(LabelDecision decision,
                                             const LabelAssessment& assessment) const = 0;
  virtual std::string explain_take_over(const DriveMeasurement& measurement) const = 0;
  // Training on a new label goes on in rounds until the committee mean's force error on it is at
  // most this (0: one round).
  virtual double label_fit_force_error() const { return 0.0; }
  // Throws std::invalid_argument when the model cannot serve the criterion.
  virtual void check_committee_size(int64_t /*committee_size*/) const {}
  // Whether a checked configuration that needs no label is worth verifying with one now and
  // then: the calibration learns only from labels, which are taken where the predicted errors are
  // above the accuracy, so a prediction below it is otherwise never tested where the model drives
  // unlabelled (OnTheFlyPolicy::after_check schedules the verifications).
  virtual bool worth_verifying(const DriveMeasurement& /*measurement*/) const { return false; }
  // Whether a label the model asked for while it drove shows it far off there (its error,
  // predicted before it was learned, well above the accuracy): the model drove that far on a fit
  // that could not tell, and it is watched on every step for check_every steps after the label
  // (OnTheFlyPolicy::after_label).
  virtual bool label_shows_model_wrong(const LabelAssessment& /*assessment*/) const {
    return false;
  }
};

// drive auto thresholds <force_rmse> <uncertainty> <take_over> (docs/design.md §9).
class UncertaintyThresholds final : public DriveCriterion {
 public:
  UncertaintyThresholds(double hand_over_force_rmse, double label_uncertainty,
                        double take_over_uncertainty);
  std::string describe() const override;
  bool compares_prediction_with_label() const override { return false; }
  double checked_value(const DriveMeasurement& m) const override { return m.max_force_spread; }
  bool judges_label(bool from_check, bool /*learned*/) const override { return !from_check; }
  LabelDecision judge_label(const LabelAssessment& assessment, bool reference_drives) const override;
  CheckOutcome judge_check(const DriveMeasurement& measurement) const override;
  std::string explain_label_decision(LabelDecision decision,
                                     const LabelAssessment& assessment) const override;
  std::string explain_take_over(const DriveMeasurement& measurement) const override;

 private:
  double hand_over_force_rmse_, label_uncertainty_, take_over_uncertainty_;
};

// drive auto accuracy <force> <energy> (docs/design.md §13).
class CalibratedAccuracy final : public DriveCriterion {
 public:
  // default_units: the unit style when the input named no accuracy (the default one), else "".
  CalibratedAccuracy(double target_force_error, double target_energy_error, int64_t min_labels,
                     double take_over_factor, std::string default_units);
  std::string describe() const override;
  bool compares_prediction_with_label() const override { return true; }
  double checked_value(const DriveMeasurement& m) const override {
    return m.predicted_force_error;
  }
  bool judges_label(bool /*from_check*/, bool learned) const override { return learned; }
  LabelDecision judge_label(const LabelAssessment& assessment, bool reference_drives) const override;
  CheckOutcome judge_check(const DriveMeasurement& measurement) const override;
  std::string explain_label_decision(LabelDecision decision,
                                     const LabelAssessment& assessment) const override;
  std::string explain_take_over(const DriveMeasurement& measurement) const override;
  double label_fit_force_error() const override { return 0.5 * target_force_error_; }
  void check_committee_size(int64_t committee_size) const override;

 private:
  // Half way to a take-over, so that a hand-over is not followed by a take-over at once.
  double hand_over_factor() const { return 0.5 * take_over_factor_; }

  double target_force_error_, target_energy_error_;
  int64_t min_labels_;
  double take_over_factor_;
  std::string default_units_;
};

// drive auto accuracy <force> <energy> with a model that learns each label completely in closed
// form (potentials/bayesian_linear_potential.h; docs/design.md §13.6): its committee spread is a
// posterior predictive error in force units from the first label on, so the model drives as soon
// as it has learned one label, and a checked configuration predicted above the accuracy is
// labelled and learned at once: the reference never drives again. So is one whose descriptors
// spread wider than the labelled configurations' (the model would extrapolate). Where the fit's own noise is
// above the accuracy (a model class that cannot reach it), only the reducible part of the
// predicted error asks for labels.
class PosteriorAccuracy final : public DriveCriterion {
 public:
  // take_over_factor: a label whose error was above it x the accuracy shows the model far off
  // where it drove (label_shows_model_wrong); the reference never drives again.
  PosteriorAccuracy(double target_force_error, double target_energy_error, double take_over_factor,
                    std::string default_units);
  std::string describe() const override;
  bool compares_prediction_with_label() const override { return true; }
  double checked_value(const DriveMeasurement& m) const override {
    return m.predicted_force_error;
  }
  bool judges_label(bool /*from_check*/, bool learned) const override { return learned; }
  LabelDecision judge_label(const LabelAssessment& assessment, bool reference_drives) const override;
  CheckOutcome judge_check(const DriveMeasurement& measurement) const override;
  std::string explain_label_decision(LabelDecision decision,
                                     const LabelAssessment& assessment) const override;
  std::string explain_take_over(const DriveMeasurement& measurement) const override;
  void check_committee_size(int64_t committee_size) const override;
  // When the fit leaves a noise above half the accuracy on its own labels (force or energy): the
  // model class is short of the data there, and a posterior that takes its misfit for noise is
  // over-confident away from the labels (examples/si64-cp2k: energy predicted 1.4 meV/atom where
  // it was 2.6, with a fitted noise of 1.0 and forces of 0.09 eV/A).
  bool worth_verifying(const DriveMeasurement& measurement) const override;
  // Above take_over x the accuracy. A young fit (a label or two) is sure near its labels and
  // wrong a few steps away: SiC from Tersoff, fitted to the lattice and one warming frame, drove
  // 10 steps unchecked into forces 47 eV/A off, and learning that wreck left its fit a noise of
  // 0.6 eV/A for good (docs/bayesian-learner.md).
  bool label_shows_model_wrong(const LabelAssessment& assessment) const override;

 private:
  double target_force_error_, target_energy_error_;
  double take_over_factor_;
  std::string default_units_;
};

// The criterion of drive auto's settings (null for the fixed modes). Expects settings that
// check_policy_settings accepted.
std::shared_ptr<const DriveCriterion> make_drive_criterion(const PolicySettings& settings);

}  // namespace otf

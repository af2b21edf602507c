// Who drives the MD and when the reference is asked for a label: the on-the-fly (active-learning)
// policy of fix otf/train as a small state machine (docs/design.md §9). It sees only step numbers
// and what the trainer measured; under drive auto its criterion (drive_criterion.h) judges. It
// never touches atoms, the model or the reference, so it is tested on its own
// (tests/training/test_on_the_fly_policy.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "drive_criterion.h"

namespace otf {

enum class DriveMode { Reference, Model, Auto };
// "reference" | "model" | "auto", any case; throws std::invalid_argument listing them.
DriveMode parse_drive_mode(const std::string& text);
std::string to_string(DriveMode mode);

struct PolicySettings {
  DriveMode mode = DriveMode::Model;
  // Label (and train) every label_every steps in the fixed modes; under drive auto every step
  // on which the reference drives is labelled (each answer was paid for).
  int64_t label_every = 10;
  // drive auto: while the model drives, the uncertainty is checked every check_every steps
  // (unset: label_every).
  std::optional<int64_t> check_every;
  // drive auto: the model takes over at a labelled step once the validation force RMSE is below
  // hand_over_force_rmse and the largest force uncertainty below label_uncertainty; while it
  // drives, a checked configuration above label_uncertainty is labelled, and above
  // take_over_uncertainty the reference drives again. Force units of the MD run.
  double hand_over_force_rmse = 0.0;
  double label_uncertainty = 0.0;
  double take_over_uncertainty = 0.0;
  // drive auto by accuracy instead (docs/design.md §13): the force error per component and the
  // per-atom energy error the user asks for, compared with calibrated errors
  // (training/error_calibration.h). The model takes over once at least min_labels labels were
  // predicted before they were learned (calibration samples) and the last one's actual errors
  // were within hand_over_factor() times the targets; while it drives, a checked configuration
  // whose calibrated error exceeds a target is labelled, and above take_over_factor times the
  // force target (predicted, or found when a label comes back) the reference drives again.
  double target_force_error = 0.0;
  double target_energy_error = 0.0;
  int64_t min_labels = 5;
  double take_over_factor = 4.0;
  // Set by set_default_accuracy: the input named no accuracy, these are the unit style's default.
  std::string default_accuracy_units;
  // Not a keyword: set by the trainer when the model learns each label completely in closed form
  // (Potential::learns_in_closed_form); drive auto accuracy then judges by its posterior
  // (PosteriorAccuracy in drive_criterion.h).
  bool learner_fits_each_label = false;

  bool by_accuracy() const { return target_force_error != 0.0 || target_energy_error != 0.0; }
};

// The policy's rules, each stated once: ranges named by the fix otf/train keyword, and which
// settings go together. Throws std::invalid_argument.
void check_policy_settings(const PolicySettings& settings);

// drive auto's accuracy when the input names neither accuracy nor thresholds: 0.05 eV/Angstrom
// per force component and 2 meV per atom, what production interatomic potentials are validated
// to (docs/design.md §13), in the MD code's unit style. Throws std::invalid_argument for a unit
// style without a physical scale (lj).
void set_default_accuracy(PolicySettings& settings, const std::string& unit_style);

// What a restart must carry for the policy to continue exactly.
struct PolicyState {
  bool reference_drives = false;
  int64_t last_labelled_step = -1;
  int64_t last_checked_step = -1;
  int64_t last_counted_step = -1;  // the last step counted (a repeated setup() step is not)
  int64_t model_driven_steps = 0;
  int64_t model_phase_labels = 0;  // labels asked for while the model drove
  // The last check found the model unsure (CheckOutcome::check_next_step) while it went on
  // driving: the next step is checked too, and so on until a check finds it sure (a
  // configuration heading somewhere unlearned is caught within a step, not check_every later).
  bool check_next_step = false;
  // The checked value (DriveCriterion::checked_value) of the check that last asked for a label: a
  // check between the scheduled ones labels only above 1.25 x it (the model getting worse), so
  // that a model that cannot reach the accuracy is not labelled on every step.
  double watch_floor = 0.0;
  // A label the model asked for showed it wrong where it drove (DriveCriterion::
  // label_shows_model_wrong): every step up to this one (check_every after that label) is checked,
  // and labelled when the model is unsure there; -1: none.
  int64_t watch_until = -1;
  // The first step this policy counted (-1: none yet): where the run's labelled history starts,
  // against which after_check spaces its verifications.
  int64_t first_counted_step = -1;
  // Steps of labelled history learned before this run (a warm start's journal: its first to last
  // labelled step), added to this run's own.
  int64_t inherited_history = 0;
};

// What to do on one MD step, decided before anything is evaluated.
struct StepPlan {
  // The step was already seen (setup() of a later run evaluates it again).
  bool repeated_step = false;
  // The reference drives and this step is not labelled: it only supplies the MD forces.
  bool reference_forces = false;
  // Label this configuration and train on it.
  bool label = false;
  // drive auto with the model driving: measure the uncertainty, then ask check_outcome().
  bool check = false;
};

class OnTheFlyPolicy {
 public:
  explicit OnTheFlyPolicy(PolicySettings settings);

  // Counts the step and plans it. A step is labelled or checked at most once.
  StepPlan plan_step(int64_t step);
  // After a label under drive auto (when the criterion judges it): the model takes over, or gives
  // the MD back to the reference, as the criterion decides. Other modes: None.
  LabelDecision after_label(const LabelAssessment& assessment);
  // After measuring the committee on a checked step (drive auto, the model driving): a label it
  // asks for is counted and marks the step labelled. With reference_takes_over, the reference
  // drives from this step on (its label's forces move the atoms). A scheduled check that needs
  // no label but that the criterion finds worth verifying (DriveCriterion::worth_verifying) is
  // labelled once the model has driven unlabelled for as long as the run's labelled history
  // before it (from the first step to the last label; at least check_every): verifications at
  // doubling intervals, a handful in a long run, each a calibration sample from where the model
  // drives on its own.
  CheckOutcome after_check(int64_t step, const DriveMeasurement& measurement);
  // A label of a configuration the model drove to was refused as a wreck (the trainer's outlier
  // guard): under drive auto the reference drives from the next step on, until a learned label
  // lets the criterion hand over again. Returns whether the reference took over.
  bool after_refused_label();

  // A check value this many times the one at the last label is distinctly worse: consecutive
  // steps' predictions are close, and a rounding difference (another rank count) must not decide.
  static constexpr double kDistinctlyWorse = 1.25;
  // The model drives on while a label is in flight (label_wait no): the next step is checked too,
  // as after a check that found the model unsure.
  void watch_next_step() {
    if (!state_.reference_drives && criterion_) state_.check_next_step = true;
  }
  // The step since which the model has driven without a label: the last label, or the first
  // counted step when there was none (after_check spaces its verifications from it).
  int64_t unlabelled_since() const;
  // A warm start learned labels from `steps` steps of an earlier run's MD: verifications are
  // spaced as if that history were this run's.
  void inherit_labelled_history(int64_t steps) { state_.inherited_history = std::max<int64_t>(steps, 0); }
  // drive auto's criterion; null in the fixed modes.
  const DriveCriterion* criterion() const { return criterion_.get(); }
  bool reference_drives() const { return state_.reference_drives; }
  const PolicySettings& settings() const { return settings_; }
  const PolicyState& state() const { return state_; }
  // The earliest step after `step` that plan_step may label or check, as the state is now: the
  // next step while the reference drives (every step asks it for forces) or while an unsure model
  // is watched, else the next step on the check (or label) schedule. Walkers skip their rounds on
  // the steps before it (walker_exchange.h).
  int64_t earliest_label_step_after(int64_t step) const;
  // Restores a saved state. Who drives is taken from it only under drive auto: a fixed mode
  // given again keeps its own choice.
  void restore(const PolicyState& state);

 private:
  // Whether `step` is checked whatever the schedule: the check before it found the model unsure,
  // or it lies in a watch window after a label that found the model far off.
  bool watched_at(int64_t step) const {
    return state_.check_next_step || step <= state_.watch_until;
  }

  PolicySettings settings_;
  std::shared_ptr<const DriveCriterion> criterion_;
  PolicyState state_;
};

}  // namespace otf

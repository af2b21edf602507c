#include "on_the_fly_policy.h"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <utility>

#include "atomic_units.h"
#include "keywords.h"

namespace otf {

namespace {

constexpr KeywordTable<DriveMode, 3> kDriveModes{{
    {"reference", DriveMode::Reference},
    {"model", DriveMode::Model},
    {"auto", DriveMode::Auto},
}};

}  // namespace

DriveMode parse_drive_mode(const std::string& text) {
  return parse_keyword(kDriveModes, text, "drive", "expected reference, model or auto");
}

std::string to_string(DriveMode mode) { return keyword_spelling(kDriveModes, mode, "DriveMode"); }

void check_policy_settings(const PolicySettings& s) {
  require_integer_in("every", s.label_every, 1, INT_MAX);
  if (s.check_every) require_integer_in("check_every", *s.check_every, 1, INT_MAX);
  require_integer_in("min_labels", s.min_labels, 1, 1000000);
  require_real_in("take_over", s.take_over_factor, 2.0, 1e6, true);
  const bool thresholds_given = s.hand_over_force_rmse != 0.0 || s.label_uncertainty != 0.0 ||
                                s.take_over_uncertainty != 0.0;
  const bool accuracy_given = s.by_accuracy();
  if (s.mode != DriveMode::Auto) {
    if (thresholds_given || accuracy_given || s.check_every)
      throw std::invalid_argument("accuracy, thresholds and check_every apply to drive auto only");
    return;
  }
  if (accuracy_given && thresholds_given)
    throw std::invalid_argument("drive auto takes either accuracy or thresholds, not both");
  if (accuracy_given) {
    require_real_in("accuracy <force>", s.target_force_error, 0.0, 1e30, true);
    require_real_in("accuracy <energy>", s.target_energy_error, 0.0, 1e30, true);
    return;
  }
  if (!thresholds_given)
    throw std::invalid_argument(
        "drive auto needs accuracy <force> <energy> (the errors you want, e.g. accuracy 0.05 "
        "0.002 in metal units) or thresholds <force_rmse> <uncertainty> <take_over> (force "
        "units, e.g. thresholds 0.1 0.15 0.5)");
  require_real_in("thresholds <force_rmse>", s.hand_over_force_rmse, 0.0, 1e30, true);
  require_real_in("thresholds <uncertainty>", s.label_uncertainty, 0.0, 1e30, true);
  require_real_in("thresholds <take_over>", s.take_over_uncertainty, 0.0, 1e30, true);
  if (!(s.take_over_uncertainty >= s.label_uncertainty))
    throw std::invalid_argument(
        "thresholds <force_rmse> <uncertainty> <take_over> need force_rmse > 0 and 0 < "
        "uncertainty <= take_over (got " + format_number(s.hand_over_force_rmse) + " " +
        format_number(s.label_uncertainty) + " " + format_number(s.take_over_uncertainty) + ")");
}

void set_default_accuracy(PolicySettings& settings, const std::string& unit_style) {
  constexpr double kForceEvPerAngstrom = 0.05;
  constexpr double kEnergyEvPerAtom = 0.002;
  AtomicUnitConversion units;
  try {
    units = atomic_unit_conversion(unit_style);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("units " + unit_style + " have no physical scale for drive "
                                "auto's default accuracy: give accuracy <force> <energy> (or "
                                "thresholds), or choose drive model or drive reference");
  }
  const AtomicUnitConversion metal = atomic_unit_conversion("metal");
  settings.target_force_error = kForceEvPerAngstrom * metal.hartree_per_bohr_per_force() /
                                units.hartree_per_bohr_per_force();
  settings.target_energy_error =
      kEnergyEvPerAtom * metal.hartree_per_energy / units.hartree_per_energy;
  settings.default_accuracy_units = unit_style;
}

OnTheFlyPolicy::OnTheFlyPolicy(PolicySettings settings) : settings_(std::move(settings)) {
  check_policy_settings(settings_);
  if (!settings_.check_every) settings_.check_every = settings_.label_every;
  criterion_ = make_drive_criterion(settings_);
  // Auto starts with the reference driving, until the model is good enough.
  state_.reference_drives = settings_.mode != DriveMode::Model;
}

StepPlan OnTheFlyPolicy::plan_step(int64_t step) {
  StepPlan plan;
  const bool model_drives = !state_.reference_drives;
  plan.repeated_step = step == state_.last_counted_step;
  if (!plan.repeated_step) {
    if (state_.first_counted_step < 0) state_.first_counted_step = step;
    state_.last_counted_step = step;
    if (model_drives) ++state_.model_driven_steps;
  }
  // The fixed modes label on schedule. Under drive auto the reference drives only to teach the
  // model and each of its answers is paid for (an ab initio call per step), so each is learned
  // (issue 39); while the model drives, the uncertainty is checked on schedule and only what is
  // uncertain is labelled.
  const bool checking = criterion_ && model_drives;
  const bool learns_each_answer = criterion_ && state_.reference_drives;
  plan.label = !checking && (learns_each_answer || step % settings_.label_every == 0) &&
               step != state_.last_labelled_step;
  plan.check = checking && (step % *settings_.check_every == 0 || watched_at(step)) &&
               step != state_.last_checked_step;
  plan.reference_forces = state_.reference_drives && !plan.label;
  if (plan.label) state_.last_labelled_step = step;
  if (plan.check) state_.last_checked_step = step;
  return plan;
}

int64_t OnTheFlyPolicy::earliest_label_step_after(int64_t step) const {
  const auto next_on_schedule = [step](int64_t every) { return (step / every + 1) * every; };
  if (state_.reference_drives) return step + 1;
  if (criterion_) return watched_at(step + 1) ? step + 1 : next_on_schedule(*settings_.check_every);
  return next_on_schedule(settings_.label_every);
}

LabelDecision OnTheFlyPolicy::after_label(const LabelAssessment& assessment) {
  if (!criterion_) return LabelDecision::None;
  if (!state_.reference_drives && criterion_->label_shows_model_wrong(assessment))
    state_.watch_until = state_.last_labelled_step + *settings_.check_every;
  const LabelDecision decision = criterion_->judge_label(assessment, state_.reference_drives);
  if (decision == LabelDecision::ModelDrives) state_.reference_drives = false;
  if (decision == LabelDecision::ReferenceDrives) state_.reference_drives = true;
  return decision;
}

CheckOutcome OnTheFlyPolicy::after_check(int64_t step, const DriveMeasurement& measurement) {
  if (!criterion_) return {};
  CheckOutcome outcome = criterion_->judge_check(measurement);
  const bool scheduled = step % *settings_.check_every == 0;
  const double value = criterion_->checked_value(measurement);
  if (!scheduled && outcome.label && !outcome.reference_takes_over &&
      value <= kDistinctlyWorse * state_.watch_floor)
    outcome.label = false;  // watched, but not distinctly worse than at its last label
  // Watched only because a label showed the model wrong: labelled where it is unsure, not for
  // what a scheduled check would label (forces never learned, descriptors spreading wider).
  if (!scheduled && !state_.check_next_step && !outcome.check_next_step) outcome.label = false;
  state_.check_next_step = outcome.check_next_step && !outcome.reference_takes_over;
  if (!outcome.label && scheduled && criterion_->worth_verifying(measurement)) {
    const int64_t origin = std::max<int64_t>(state_.first_counted_step, 0);
    const int64_t since = unlabelled_since();
    const int64_t interval =
        std::max(since - origin + state_.inherited_history, *settings_.check_every);
    outcome.verification = outcome.label = step - since >= interval;
  }
  if (!outcome.label) return outcome;
  state_.watch_floor = value;
  state_.last_labelled_step = step;
  ++state_.model_phase_labels;
  state_.reference_drives = outcome.reference_takes_over;
  return outcome;
}

int64_t OnTheFlyPolicy::unlabelled_since() const {
  return std::max({state_.last_labelled_step, state_.first_counted_step, int64_t{0}});
}

bool OnTheFlyPolicy::after_refused_label() {
  if (settings_.mode != DriveMode::Auto || state_.reference_drives) return false;
  state_.reference_drives = true;
  state_.check_next_step = false;
  state_.watch_until = -1;
  return true;
}

void OnTheFlyPolicy::restore(const PolicyState& state) {
  const bool reference_drives = state_.reference_drives;
  state_ = state;
  if (settings_.mode != DriveMode::Auto) state_.reference_drives = reference_drives;
}

}  // namespace otf

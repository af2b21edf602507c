#include "on_the_fly_policy.h"

#include <stdexcept>

#include "atomic_units.h"

namespace otf {

DriveMode parse_drive_mode(const std::string& text) {
  if (text == "reference") return DriveMode::Reference;
  if (text == "model") return DriveMode::Model;
  if (text == "auto") return DriveMode::Auto;
  throw std::invalid_argument("unknown drive '" + text + "' (expected reference, model or auto)");
}

std::string to_string(DriveMode mode) {
  switch (mode) {
    case DriveMode::Reference: return "reference";
    case DriveMode::Model: return "model";
    case DriveMode::Auto: return "auto";
  }
  return "unknown";
}

void check_policy_settings(const PolicySettings& s) {
  if (s.label_every < 1) throw std::invalid_argument("every must be >= 1");
  if (s.check_every < 0) throw std::invalid_argument("check_every must be >= 1");
  const bool thresholds_given = s.hand_over_force_rmse > 0.0 || s.label_uncertainty > 0.0 ||
                                s.take_over_uncertainty > 0.0;
  const bool accuracy_given = s.target_force_error > 0.0 || s.target_energy_error > 0.0;
  if (s.min_labels < 1) throw std::invalid_argument("min_labels must be >= 1");
  if (!(s.take_over_factor > 2.0))
    throw std::invalid_argument("take_over must be > 2 (times the force target; the model "
                                "takes over at half of it)");
  if (s.mode == DriveMode::Auto && accuracy_given) {
    if (thresholds_given)
      throw std::invalid_argument("drive auto takes either accuracy or thresholds, not both");
    if (!(s.target_force_error > 0.0 && s.target_energy_error > 0.0))
      throw std::invalid_argument("accuracy <force> <energy> needs both > 0 (force units, and "
                                  "energy units per atom), e.g. accuracy 0.05 0.002");
  } else if (s.mode == DriveMode::Auto) {
    if (!thresholds_given)
      throw std::invalid_argument(
          "drive auto needs accuracy <force> <energy> (the errors you want, e.g. accuracy 0.05 "
          "0.002 in metal units) or thresholds <force_rmse> <uncertainty> <take_over> (force "
          "units, e.g. thresholds 0.1 0.15 0.5)");
    if (!(s.hand_over_force_rmse > 0.0 && s.label_uncertainty > 0.0 &&
          s.take_over_uncertainty >= s.label_uncertainty))
      throw std::invalid_argument(
          "thresholds <force_rmse> <uncertainty> <take_over> need force_rmse > 0 and 0 < "
          "uncertainty <= take_over");
  } else if (thresholds_given || accuracy_given || s.check_every > 0) {
    throw std::invalid_argument("accuracy, thresholds and check_every apply to drive auto only");
  }
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
}

OnTheFlyPolicy::OnTheFlyPolicy(PolicySettings settings) : settings_(settings) {
  check_policy_settings(settings_);
  if (settings_.check_every == 0) settings_.check_every = settings_.label_every;
  // Auto starts with the reference driving, until the model is good enough.
  state_.reference_drives = settings_.mode != DriveMode::Model;
}

StepPlan OnTheFlyPolicy::plan_step(int64_t step) {
  StepPlan plan;
  const bool model_drives = !state_.reference_drives;
  plan.repeated_step = step == state_.last_counted_step;
  if (!plan.repeated_step) {
    state_.last_counted_step = step;
    if (model_drives) ++state_.model_driven_steps;
  }
  // The fixed modes and auto's reference phase label on schedule; auto's model phase checks the
  // uncertainty on schedule and labels only what is uncertain.
  const bool checking = settings_.mode == DriveMode::Auto && model_drives;
  plan.label = !checking && step % settings_.label_every == 0 && step != state_.last_labelled_step;
  plan.check = checking && step % settings_.check_every == 0 && step != state_.last_checked_step;
  plan.reference_forces = state_.reference_drives && !plan.label;
  if (plan.label) state_.last_labelled_step = step;
  if (plan.check) state_.last_checked_step = step;
  return plan;
}

bool OnTheFlyPolicy::after_label(bool validated, double validation_force_rmse,
                                 double max_uncertainty) {
  if (settings_.mode != DriveMode::Auto || !state_.reference_drives || !validated) return false;
  if (validation_force_rmse < settings_.hand_over_force_rmse &&
      max_uncertainty < settings_.label_uncertainty) {
    state_.reference_drives = false;
    return true;
  }
  return false;
}

LabelDecision OnTheFlyPolicy::after_label(const LabelAssessment& a) {
  if (settings_.mode != DriveMode::Auto) return LabelDecision::None;
  if (!settings_.by_accuracy())
    return after_label(a.validated, a.validation_force_rmse, a.max_uncertainty)
               ? LabelDecision::ModelDrives
               : LabelDecision::None;
  if (a.label_force_error < 0.0) return LabelDecision::None;
  const double f = settings_.target_force_error, e = settings_.target_energy_error;
  if (state_.reference_drives) {
    const double factor = settings_.hand_over_factor();
    if (a.calibration_samples >= settings_.min_labels && a.label_force_error <= factor * f &&
        a.label_energy_error <= factor * e) {
      state_.reference_drives = false;
      return LabelDecision::ModelDrives;
    }
    return LabelDecision::None;
  }
  if (a.label_force_error > settings_.take_over_factor * f) {
    state_.reference_drives = true;
    return LabelDecision::ReferenceDrives;
  }
  return LabelDecision::None;
}

CheckOutcome OnTheFlyPolicy::after_check_by_accuracy(int64_t step, double predicted_force_error,
                                                     double predicted_energy_error) {
  CheckOutcome outcome;
  if (predicted_force_error <= settings_.target_force_error &&
      predicted_energy_error <= settings_.target_energy_error)
    return outcome;
  outcome.label = true;
  state_.last_labelled_step = step;
  ++state_.model_phase_labels;
  outcome.reference_takes_over =
      predicted_force_error > settings_.take_over_factor * settings_.target_force_error;
  state_.reference_drives = outcome.reference_takes_over;
  return outcome;
}

CheckOutcome OnTheFlyPolicy::after_check(int64_t step, double max_uncertainty) {
  CheckOutcome outcome;
  if (max_uncertainty <= settings_.label_uncertainty) return outcome;
  outcome.label = true;
  state_.last_labelled_step = step;
  ++state_.model_phase_labels;
  outcome.reference_takes_over = max_uncertainty > settings_.take_over_uncertainty;
  state_.reference_drives = outcome.reference_takes_over;
  return outcome;
}

void OnTheFlyPolicy::restore(const PolicyState& state) {
  const bool reference_drives = state_.reference_drives;
  state_ = state;
  if (settings_.mode != DriveMode::Auto) state_.reference_drives = reference_drives;
}

}  // namespace otf

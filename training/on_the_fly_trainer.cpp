#include "on_the_fly_trainer.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "atomic_units.h"
#include "fnv1a.h"
#include "frame_gather.h"
#include "frame_intake.h"
#include "journal_replay.h"
#include "keywords.h"
#include "label_journal.h"
#include "learning_log.h"
#include "model_spec.h"
#include "periodic_system.h"
#include "potential.h"
#include "precision.h"
#include "rank_agreement.h"
#include "statistics_phase.h"
#include "trainer_narration.h"
#include "warm_start.h"

namespace otf {
namespace {

// Adds the wall time of its life to a counter.
class Stopwatch {
 public:
  explicit Stopwatch(double& seconds) : seconds_(seconds), start_(Clock::now()) {}
  ~Stopwatch() { seconds_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  double& seconds_;
  Clock::time_point start_;
};

std::string formatted(const char* format, double a, double b, double c, double d) {
  char text[256];
  std::snprintf(text, sizeof(text), format, a, b, c, d);
  return text;
}

// The answer of a reference that labels only while its caller waits, computed at once and held
// back (label_wait no with reference_delay: an expensive reference emulated by a cheap one).
class HeldBackLabel : public PendingLabel {
 public:
  explicit HeldBackLabel(ReferenceLabel label) : label_(std::move(label)) {}
  bool ready() override { return true; }
  ReferenceLabel wait() override { return label_; }

 private:
  ReferenceLabel label_;
};

}  // namespace

// label_wait no: a label asked for while the model drove, its answer still to come. What the
// trainer needs of the step it was asked on is kept whole on rank 0, since the atoms have moved
// (and may have changed ranks) by the time the answer is learned.
struct LabelInFlight {
  int64_t step = 0;
  std::unique_ptr<PendingLabel> answer;
  std::chrono::steady_clock::time_point due;  // reference_delay after the call started
  double asked_value = 0.0;  // the drive criterion's checked value on the step it was asked on
  LabelledFrame frame;                        // rank 0: the configuration, its label to come
  // The committee's prediction before the label (a calibrating criterion), rank 0, frame order.
  bool prediction_kept = false;
  bool from_trained_model = false;
  std::vector<double> predicted_forces, predicted_spread;
  double predicted_energy = 0.0, energy_spread_per_atom = 0.0;
};

template <typename Body> void OnTheFlyTrainer::agreed(const std::string& what, Body&& body) {
  agreed_or_throw(world_, what, std::forward<Body>(body));
}

void check_trainer_fields(const TrainerSettings& s) {
  require_integer_in("save_every", s.save_every, 0, 1000000000000000000LL);
  if (s.save_every > 0 && s.save_path.empty())
    throw std::invalid_argument("save_every needs a file: save <path>");
  require_integer_in("max_skips", s.max_skipped_in_row, 0, INT_MAX);
  require_integer_in("max_calls", s.max_reference_calls, 0, 1000000000000LL);
  require_integer_in("label_steps", s.label_steps, 0, 1000000);
  require_integer_in("calibration_window", s.calibration_window, 1, 1000000);
  require_real_in("outlier_factor", s.outlier_factor, 0.0, 1e30);
  if (s.outlier_energy) require_real_in("outlier_energy", *s.outlier_energy, 0.0, 1e30);
  // An hour per call is the most a benchmark would emulate.
  require_real_in("reference_delay", s.reference_delay, 0.0, 3600.0);
  if (s.outlier_factor > 0.0 && s.outlier_factor < 2.0)
    throw std::invalid_argument("outlier_factor must be 0 (off) or at least 2, got " +
                                format_number(s.outlier_factor));
  if (!s.label_wait && s.policy.mode != DriveMode::Auto)
    throw std::invalid_argument("label_wait no applies to drive auto only (the labels asked for "
                                "while the model drives)");
}

double default_outlier_energy(const std::string& unit_style) {
  // Beyond what heating, melting or a phase change moves a solid's energy per atom (tenths of an
  // eV), short of a collapse or an explosion (eVs).
  constexpr double kEvPerAtom = 1.0;
  try {
    const AtomicUnitConversion units = atomic_unit_conversion(unit_style);
    return kEvPerAtom * atomic_unit_conversion("metal").hartree_per_energy /
           units.hartree_per_energy;
  } catch (const std::invalid_argument&) {
    return 0.0;
  }
}

void check_trainer_settings(const TrainerSettings& settings) {
  check_trainer_fields(settings);
  check_policy_settings(settings.policy);
  check_session_settings(settings.session);
}

namespace {

// The policy's settings with what the model says about how it learns.
PolicySettings policy_settings_for(PolicySettings settings, const Potential& potential) {
  settings.learner_fits_each_label = potential.learns_in_closed_form();
  return settings;
}

// The settings with the policy's as the trainer resolved them (what the model says of how it
// learns), for the log.
TrainerSettings trainer_settings_with(TrainerSettings settings, const PolicySettings& policy) {
  settings.policy = policy;
  return settings;
}

// The walkers' exchange; its rule (as many ranks per walker) agreed on every rank already.
WalkerExchange walker_exchange(const WalkerLayout& layout, MPI_Comm world) {
  try {
    return WalkerExchange(layout, world);
  } catch (const std::invalid_argument& e) {
    throw TrainingError(e.what());
  }
}

// Each walker writes its own journal and learning log.
TrainerSettings settings_of_walker(TrainerSettings settings, const WalkerLayout& layout) {
  settings.journal_path = walker_file_path(settings.journal_path, layout);
  settings.learning_log_path = walker_file_path(settings.learning_log_path, layout);
  return settings;
}

// What every walker must agree on, as a hash: how the shared model is trained (the session's
// settings, the label fit after each label and its target, the warm-start files), and when the
// model file is written (walker 0 writes it, all wait for it). Different values would let the
// replicas drift apart, or leave walkers waiting for a save that never comes. The policy's own
// settings (accuracy, every, take_over, ...) may differ: each walker decides for its own MD.
uint64_t shared_settings_hash(const TrainerSettings& settings, double label_fit_force_error) {
  const TrainingSessionSettings& s = settings.session;
  const LRScheduleSettings& lr = s.lr_schedule_settings;
  char numbers[1024];
  std::snprintf(numbers, sizeof(numbers),
                "%d %d %.17g %.17g %.17g %.17g %lld %lld %lld %.17g %llu %.17g %.17g %.17g %.17g "
                "%lld %d %lld %d %lld %.17g %lld %.17g %lld %.17g %lld %.17g %lld %d %d",
                static_cast<int>(s.precision), static_cast<int>(s.optimizer), s.learning_rate,
                s.energy_weight, s.force_weight, s.stress_weight,
                static_cast<long long>(s.steps_per_frame), static_cast<long long>(s.batch_frames),
                static_cast<long long>(s.buffer_frames), s.validation_fraction,
                static_cast<unsigned long long>(s.seed), s.clip_max_norm,
                s.grad_scaler.init_scale, s.grad_scaler.growth_factor,
                s.grad_scaler.backoff_factor, static_cast<long long>(s.grad_scaler.growth_interval),
                s.grad_scaler.enabled ? 1 : 0, static_cast<long long>(s.stats_frames),
                static_cast<int>(s.lr_schedule), static_cast<long long>(lr.step_size.value_or(-1)),
                lr.gamma.value_or(-1.0), static_cast<long long>(lr.t_max.value_or(-1)),
                lr.eta_min.value_or(-1.0), static_cast<long long>(s.accumulate), s.ema_decay,
                static_cast<long long>(settings.label_steps), label_fit_force_error,
                static_cast<long long>(settings.save_every), settings.save_path.empty() ? 0 : 1,
                settings.label_wait ? 1 : 0);
  std::string text = numbers;
  for (const std::string& path : settings.warm_start_paths) text += "\n" + path;
  return fnv1a64(text.data(), text.size());
}

}  // namespace

OnTheFlyTrainer::OnTheFlyTrainer(std::shared_ptr<Potential> potential,
                                 const TrainerSettings& settings, Reference& reference,
                                 MPI_Comm world, TrainerMessages messages,
                                 const WalkerLayout& walkers) :
    settings_(settings_of_walker(settings, walkers)),
    reference_(reference),
    world_(world),
    walkers_(walker_exchange(walkers, world)),
    messages_(std::move(messages)),
    policy_(policy_settings_for(settings.policy, *potential)),
    calibration_(settings.calibration_window, potential->learns_in_closed_form()),
    outlier_energy_(settings.outlier_energy.value_or(default_outlier_energy(settings.unit_style))) {
  MPI_Comm_rank(world_, &rank_);
  MPI_Comm_size(world_, &ranks_);
  try {
    check_trainer_fields(settings_);
  } catch (const std::invalid_argument& e) {
    throw TrainingError(e.what());
  }
  agreed("cannot set up training", [&] {
    session_ = std::make_unique<TrainingSession>(std::move(potential), settings_.session, world_);
  });
  if (const DriveCriterion* criterion = policy_.criterion()) {
    try {
      criterion->check_committee_size(session_->potential()->committee_size());
    } catch (const std::invalid_argument& e) {
      throw TrainingError(e.what());
    }
  }
  if (walkers_.shared()) {
    const DriveCriterion* criterion = policy_.criterion();
    // A closed-form fit has no label fit: there the accuracy may differ per walker.
    const double label_fit = criterion != nullptr && !session_->fits_in_closed_form()
                                 ? criterion->label_fit_force_error()
                                 : 0.0;
    const bool same_settings = walkers_.same_everywhere(shared_settings_hash(settings_, label_fit));
    const bool same_model = walkers_.same_everywhere(session_->weights_hash());
    if (!same_settings)
      throw TrainingError(
          "the walkers train one model, so its training keywords must be the same in every "
          "partition: precision, optimizer, lr, lr_schedule, batch, steps_per_frame, buffer, "
          "validation, seed, clip, loss weights, grad_scaler, stats_frames, accumulate, ema, "
          "label_steps, the accuracy's force target (for the label fit), warm_start, save, "
          "save_every and label_wait differ between partitions");
    if (!same_model)
      throw TrainingError("the walkers train one model, but the model pair_style otf made "
                          "differs between partitions: give every partition the same spec or "
                          "model file");
  }
  if (!settings_.journal_path.empty())
    agreed("cannot open the label journal", [&] {
      if (rank_ == 0) journal_ = std::make_unique<LabelJournalWriter>(settings_.journal_path);
    });
  if (rank_ == 0 && messages_.log)
    messages_.log(trainer_settings_line(trainer_settings_with(settings_, policy_.settings()),
                                        policy_.criterion(), reference_.description(),
                                        session_->potential()->cutoff(), session_->device_name()));
  if (walkers_.shared() && rank_ == 0 && messages_.log)
    messages_.log(formatted("walker %.0f of %.0f: every walker's labels train one model, the same on "
                            "every walker; the reference of this walker labels its own MD",
                            static_cast<double>(walkers.walker),
                            static_cast<double>(walkers.walkers), 0.0, 0.0));
}

OnTheFlyTrainer::~OnTheFlyTrainer() = default;

void OnTheFlyTrainer::on_step(int64_t step, MdFrameSource& md, bool last_of_run) {
  if (!run_started_) {
    run_started_ = true;
    if (!settings_.learning_log_path.empty())
      agreed("cannot open the learning log", [&] {
        if (rank_ == 0)
          learning_log_ = std::make_unique<LearningLog>(settings_.learning_log_path, restored_step_);
      });
    if (!settings_.warm_start_paths.empty()) {
      if (restored_) {
        if (rank_ == 0 && messages_.log)
          messages_.log("warm_start skipped: the replay buffer and training state come from the "
                        "restart file");
      } else {
        const WarmStartSummary learned =
            warm_start(*session_, settings_.warm_start_paths, settings_.unit_style, world_);
        if (rank_ == 0 && messages_.log) messages_.log(learned.log_line);
        // The frames are learned labels: the outlier guards and the criterion count them.
        count_learned(learned.frames, learned.largest_force, learned.lowest_energy_per_atom,
                      learned.highest_energy_per_atom);
        policy_.inherit_labelled_history(learned.labelled_span);
        // A model fitted in closed form to them drives from the first step, as after a label.
        if (learned.frames > 0 && policy_.settings().learner_fits_each_label && learned_forces())
          assess_label(step);
      }
    }
  }
  if (replay_) learn_missed_labels(step, false);
  // The reference drives from here (a hand-over decided on an earlier step): the label in flight
  // is learned before the reference's own (a label the reference drives with, or any label of
  // the fixed modes, which never have one in flight).
  if (in_flight_ && policy_.reference_drives()) collect_label_in_flight(step, true);
  const StepPlan plan = policy_.plan_step(step);
  if (plan.reference_forces) {
    ReferenceLabel label;
    // setup() repeats the call of a step already seen: counted and journalled once.
    ask_reference(step, md, ReferenceUse::Drive, !plan.repeated_step, false, label);
  }
  const DriveCriterion* criterion = policy_.criterion();
  const bool compares = compares_prediction();
  if (plan.label) {
    const FramePart frame = md.describe_frame();
    // The journal keeps the committee's uncertainty from before the label is learned; a criterion
    // that calibrates compares the prediction from before it with the answer.
    const bool measure_first = journal_enabled() || compares;
    if (measure_first) measure_uncertainty(frame, md, compares);
    const bool labelled = label_and_train(step, frame, md, measure_first);
    // A calibrating criterion keeps what was predicted before the label for the log and the
    // per-atom output.
    if (!compares) measure_uncertainty(frame, md);
    log_row(step, labelled ? "label" : "label_skipped");
    if (criterion && criterion->judges_label(false, labelled)) assess_label(step);
  }
  if (plan.check) {
    const FramePart frame = md.describe_frame();
    measure_uncertainty(frame, md, compares);
    const DriveMeasurement measured = measurement();
    note_noise_floor(step, measured);
    const int64_t unlabelled_since = policy_.unlabelled_since();
    const CheckOutcome outcome = policy_.after_check(step, measured);
    if (outcome.label && measured.extrapolates() && rank_ == 0 && messages_.log)
      messages_.log(formatted("step %.0f: labelled: its descriptors spread %.3g x as wide as the "
                              "labelled configurations' (sampling noise explains up to %.3g x)",
                              static_cast<double>(step), measured.descriptor_spread_ratio,
                              measured.descriptor_spread_limit, 0.0));
    if (outcome.verification && rank_ == 0 && messages_.log)
      messages_.log(formatted("step %.0f: labelled to verify the predicted errors (force %.3g, "
                              "energy per atom %.3g), untested by a label for %.0f steps, of a "
                              "fit whose noise on its labels is above half the accuracy",
                              static_cast<double>(step), measured.predicted_force_error,
                              measured.predicted_energy_error,
                              static_cast<double>(step - unlabelled_since)));
    if (outcome.reference_takes_over && rank_ == 0 && messages_.log)
      messages_.log("step " + std::to_string(step) + ": " + criterion->explain_take_over(measured));
    log_row(step, "check");
    // label_wait no: the MD goes on while the reference computes a label the model's driving
    // asked for (not one the reference drives with, nor a journal's replay).
    const bool in_background = outcome.label && !settings_.label_wait &&
                               !policy_.reference_drives() && !replay_;
    // One label in flight at a time. Meanwhile the model is checked every step, and a check
    // distinctly worse than the one that asked for it (the MD left the region the label covers)
    // waits for it, then is labelled as with label_wait yes.
    const bool left_region =
        in_background && in_flight_ &&
        criterion->checked_value(measured) >
            OnTheFlyPolicy::kDistinctlyWorse * in_flight_->asked_value;
    if (in_background && !in_flight_) {
      // An answer already there (a reference without a delay) is learned at the step end below.
      if (!start_label_in_flight(step, md, criterion->checked_value(measured))) {
        log_row(step, "label_skipped");
        if (criterion->judges_label(true, false)) assess_label(step);
      }
    } else if (outcome.label && (!in_background || left_region)) {
      if (left_region && rank_ == 0 && messages_.log)
        messages_.log(formatted("step %.0f: the model's predicted error grew %.3g x since the "
                                "label in flight (step %.0f) was asked for: waiting for it",
                                static_cast<double>(step),
                                criterion->checked_value(measured) / in_flight_->asked_value,
                                static_cast<double>(in_flight_->step), 0.0));
      collect_label_in_flight(step, true);
      const bool labelled = label_and_train(step, frame, md, true);
      log_row(step, labelled ? "label" : "label_skipped");
      if (criterion->judges_label(true, labelled)) assess_label(step);
    }
  }
  // A label in flight: its answer is learned on the step it is found there, and meanwhile the
  // model is watched every step, as an unsure model is (the check that asked found it unsure).
  if (in_flight_) collect_label_in_flight(step, last_of_run);
  if (in_flight_) policy_.watch_next_step();
  // Walkers finish each step together: a walker done with it learns the others' labels until
  // every walker is done (walker_exchange.h); on steps before the earliest at which some walker
  // may label (agreed at the last step end), no walker brings one and none waits for the others.
  if (walkers_.shared() && step >= next_walker_round_step_)
    while (!learn_walker_round(step, nullptr, true)) {
    }
  if (settings_.save_every > 0 && step % settings_.save_every == 0 &&
      step != counters_.last_saved_step)
    save_model(step, "save_every");
}

bool OnTheFlyTrainer::compares_prediction() const {
  const DriveCriterion* criterion = policy_.criterion();
  return criterion != nullptr && criterion->compares_prediction_with_label();
}

DriveMeasurement OnTheFlyTrainer::measurement() const {
  DriveMeasurement measured;
  measured.max_force_spread = counters_.max_uncertainty;
  measured.predicted_force_error = counters_.predicted_force_error;
  measured.predicted_energy_error = counters_.predicted_energy_error;
  measured.irreducible_force_error = irreducible_force_error_;
  // The energy's irreducible part is the fit's noise itself (measure_uncertainty says why).
  measured.irreducible_energy_error = fit_noise_.energy;
  measured.fit_force_noise = fit_noise_.force;
  measured.fit_energy_noise = fit_noise_.energy;
  measured.learned_forces = learned_forces();
  measured.descriptor_spread_ratio = descriptor_spread_.ratio;
  measured.descriptor_spread_limit = descriptor_spread_.limit;
  return measured;
}

bool OnTheFlyTrainer::learned_forces() const {
  // Below this a label's forces are a perfect crystal's rounding, which says nothing about how
  // forces depend on the positions: 1e-6 force units for an analytic reference, and 1% of the
  // force accuracy asked for, for a DFT code whose grid leaves forces of 1e-5 eV/A on a perfect
  // lattice (CP2K, examples/si64-cp2k).
  constexpr double kNoForce = 1e-6;
  constexpr double kOfTheAccuracy = 0.01;
  const double below = std::max(kNoForce, kOfTheAccuracy * policy_.settings().target_force_error);
  return counters_.largest_learned_force > below;
}

void OnTheFlyTrainer::note_noise_floor(int64_t step, const DriveMeasurement& measured) {
  const PolicySettings& s = policy_.settings();
  const bool force_floor = measured.irreducible_force_error > s.target_force_error;
  const bool energy_floor = measured.irreducible_energy_error > s.target_energy_error;
  if (noise_floor_noted_ || !(force_floor || energy_floor) || rank_ != 0 || !messages_.warn) return;
  noise_floor_noted_ = true;
  char text[640];
  std::snprintf(text, sizeof(text),
                "step %lld: the noise of the model's fit predicts errors of %.4g (force, scaled "
                "by the calibration of %lld label(s)) and %.4g (energy per atom) that no label "
                "removes, above the accuracy %.4g %.4g asked for: labels are asked for only where "
                "the posterior itself is unsure; a richer model reaches further (the spec's "
                "degree 2, more radial_functions, a larger cutoff)",
                static_cast<long long>(step), measured.irreducible_force_error,
                static_cast<long long>(calibration_.samples()), measured.irreducible_energy_error,
                s.target_force_error, s.target_energy_error);
  messages_.warn(text);
}

void OnTheFlyTrainer::assess_label(int64_t step) {
  const TrainingReport& report = session_->report();
  LabelAssessment assessment;
  assessment.trained = report.optimizer_steps > 0;
  assessment.validated = report.validated;
  assessment.validation_force_rmse = report.force_rmse;
  assessment.max_uncertainty = counters_.max_uncertainty;
  assessment.label_force_error = counters_.label_force_error;
  assessment.label_energy_error = counters_.label_energy_error;
  assessment.calibration_samples = calibration_.samples();
  const LabelDecision decision = policy_.after_label(assessment);
  if (decision == LabelDecision::None || rank_ != 0 || !messages_.log) return;
  messages_.log("step " + std::to_string(step) + ": " +
                policy_.criterion()->explain_label_decision(decision, assessment));
}

std::string OnTheFlyTrainer::calibration_summary() const {
  return calibration_summary_line(calibration_);
}

void OnTheFlyTrainer::end_of_run(int64_t step) {
  // Nothing paid for is lost: a label still in flight is waited for and learned.
  settle_labels_in_flight(step);
  if (!settings_.save_path.empty() && counters_.last_saved_step != step)
    save_model(step, "end of run");
  log_frame_parts();
  if (compares_prediction() && rank_ == 0 && messages_.log) messages_.log(calibration_summary());
}

void OnTheFlyTrainer::log_frame_parts() const {
  // What the ranks' parts of a frame hold (work and memory per rank follow them).
  const TrainingReport& report = session_->report();
  long long low[2] = {report.frame_centres, report.frame_atoms};
  long long high[2] = {low[0], low[1]}, sum[2] = {low[0], low[1]};
  MPI_Allreduce(MPI_IN_PLACE, low, 2, MPI_LONG_LONG, MPI_MIN, world_);
  MPI_Allreduce(MPI_IN_PLACE, high, 2, MPI_LONG_LONG, MPI_MAX, world_);
  MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_LONG_LONG, MPI_SUM, world_);
  if (rank_ != 0 || !messages_.log || sum[0] == 0) return;
  messages_.log(frame_parts_line(ranks_, low, high, sum));
}

void OnTheFlyTrainer::check_force_count(std::size_t components, int64_t atoms,
                                        const char* which) const {
  if (components != 3 * static_cast<std::size_t>(atoms))
    throw std::runtime_error("the reference " + reference_.description() + " returned " +
                             std::to_string(components) + " force components for " +
                             std::to_string(atoms) + " " + which);
}

bool OnTheFlyTrainer::budget_refuses(int64_t step, ReferenceUse use) {
  if (!budget_spent()) return false;
  const std::string spent = budget_spent_text();
  if (use == ReferenceUse::Label && !settings_.budget_stops_run) {
    if (!budget_noted_ && rank_ == 0 && messages_.log)
      messages_.log("step " + std::to_string(step) + ": " + spent +
                    ": no more labels, the model drives on");
    budget_noted_ = true;
  } else if (stop_reason_.empty()) {
    stop_reason_ = spent + (use == ReferenceUse::Drive ? " and the reference would drive" : "");
  }
  return true;
}

void OnTheFlyTrainer::refused_label_hands_back(int64_t step, LabelVerdict verdict) {
  // The model drove somewhere it must not learn from: the reference drives it out again.
  if (verdict == LabelVerdict::Outlier && policy_.after_refused_label() && rank_ == 0 &&
      messages_.log)
    messages_.log("step " + std::to_string(step) +
                  ": the reference drives again: the model drove to a configuration whose "
                  "label was not learned");
}

std::string OnTheFlyTrainer::budget_spent_text() const {
  return "the reference-call budget (max_calls " +
         std::to_string(settings_.max_reference_calls) + ") is spent";
}

void OnTheFlyTrainer::count_reference_call() {
  ++counters_.reference_calls;
  if (budget_spent() && settings_.budget_stops_run && stop_reason_.empty())
    stop_reason_ = budget_spent_text();
}

void OnTheFlyTrainer::skip_failed_label(const std::string& which, const ReferenceFailure& failure) {
  ++counters_.skipped_labels;
  if (rank_ == 0 && messages_.warn)
    messages_.warn(which + " skipped, the model drives on (" +
                   std::to_string(counters_.skipped_labels) + " skipped so far): " +
                   failure.what());
}

bool OnTheFlyTrainer::ask_reference(int64_t step, MdFrameSource& md, ReferenceUse use,
                                    bool first_time, bool uncertainty_measured,
                                    ReferenceLabel& label) {
  if (budget_refuses(step, use)) return false;
  const ReferenceConfiguration configuration = md.reference_configuration();
  if (first_time && replay_) {
    // Resumed after a kill: the killed run paid for this label and journalled it.
    std::optional<ReferenceLabel> journalled = replay_->take(configuration);
    if (journalled) {
      label = std::move(*journalled);
      if (replay_->finished()) replay_.reset();
      if (use == ReferenceUse::Drive) md.drive_with(label.owned_forces);
      count_reference_call();
      return true;
    }
    // The MD went another way: the journal's later frames cannot be reached, and a new call
    // must follow them in the journal.
    learn_missed_labels(step, true);
  } else if (replay_ && use == ReferenceUse::Drive) {
    // LAMMPS' setup of the continued run evaluates the restart step again: the journal has its
    // forces (a repeated call is not counted either way).
    std::optional<ReferenceLabel> journalled = replay_->take_repeated(configuration);
    if (replay_->finished()) replay_.reset();
    if (journalled) {
      label = std::move(*journalled);
      md.drive_with(label.owned_forces);
      if (rank_ == 0 && messages_.log)
        messages_.log("step " + std::to_string(step) +
                      ": the restart step's forces come from the label journal (no new reference "
                      "call)");
      return true;
    }
  }
  try {
    Stopwatch timing(counters_.reference_seconds);
    const auto started = std::chrono::steady_clock::now();
    label = reference_.label(configuration, use);
    if (settings_.reference_delay > 0.0)
      std::this_thread::sleep_until(started + std::chrono::duration<double>(settings_.reference_delay));
  } catch (const ReferenceFailure& failure) {
    if (use == ReferenceUse::Drive)
      throw TrainingError("the reference drives the MD but could not label step " +
                          std::to_string(step) + ": " + failure.what());
    skip_failed_label("step " + std::to_string(step) + ": label", failure);
    return false;
  }
  if (!first_time) return true;
  count_reference_call();
  if (journal_enabled())
    record_label(step, configuration, label,
                 uncertainty_measured ? md.force_uncertainty_per_atom() : nullptr);
  return true;
}

void OnTheFlyTrainer::learn_missed_labels(int64_t step, bool every_one) {
  const std::vector<LabelledFrame> missed = replay_->take_missed(step, every_one);
  for (const LabelledFrame& frame : missed) {
    ++counters_.reference_calls;
    ReferenceLabel label;  // whole on rank 0, for the outlier guard
    label.energy = frame.energy;
    label.virial = frame.virial;
    if (rank_ == 0) label.owned_forces = frame.forces;
    if (judge_label_values(frame.step, label, !policy_.reference_drives()) !=
        LabelVerdict::Learnable)
      continue;
    if (walkers_.shared()) {
      learn_walker_round(step, rank_ == 0 ? &frame : nullptr, false);
      continue;
    }
    Stopwatch timing(counters_.training_seconds);
    agreed("learning the journal's label of step " + std::to_string(frame.step), [&] {
      learn_whole_frame(*session_, rank_ == 0 ? &frame : nullptr, world_);
      session_->validate();
    });
  }
  if (!missed.empty() && rank_ == 0 && messages_.log)
    messages_.log("step " + std::to_string(step) + ": " + std::to_string(missed.size()) +
                  " journalled label(s) the resumed MD did not reach again learned from the "
                  "journal (no new reference call)");
  if (replay_->finished()) replay_.reset();
}

void OnTheFlyTrainer::record_label(int64_t step, const ReferenceConfiguration& configuration,
                                   const ReferenceLabel& label, const double* uncertainty) {
  agreed("cannot write the label journal " + settings_.journal_path, [&] {
    const LabelledFrame record = whole_label(step, configuration, label, uncertainty);
    if (rank_ == 0) journal_->append(record);
  });
}

LabelledFrame OnTheFlyTrainer::whole_configuration(int64_t step,
                                                   const ReferenceConfiguration& configuration,
                                                   const FrameGather& whole,
                                                   const double* uncertainty) const {
  const std::vector<double> spread =
      uncertainty != nullptr ? whole.gather(uncertainty, 1) : std::vector<double>{};
  LabelledFrame record;
  if (!whole.is_root()) return record;
  record.step = step;
  record.call = counters_.reference_calls;
  if (walkers_.shared()) record.walker = walkers_.layout().walker;
  record.units = settings_.unit_style;
  record.reference = reference_.description();
  record.cell = configuration.cell;
  record.origin = configuration.origin;
  for (const int type : whole.types()) {
    const auto t = static_cast<std::size_t>(type);
    if (t >= settings_.type_elements.size() || settings_.type_elements[t].empty())
      throw std::runtime_error("atom type " + std::to_string(type) + " has no element");
    record.symbols.push_back(settings_.type_elements[t]);
  }
  record.ids = whole.ids();
  record.positions = whole.positions();
  record.uncertainty = spread;
  return record;
}

LabelledFrame OnTheFlyTrainer::whole_label(int64_t step,
                                           const ReferenceConfiguration& configuration,
                                           const ReferenceLabel& label,
                                           const double* uncertainty) const {
  check_force_count(label.owned_forces.size(), configuration.num_local, "owned atoms");
  const FrameGather whole(configuration, world_);
  const std::vector<double> forces = whole.gather(label.owned_forces.data(), 3);
  LabelledFrame record = whole_configuration(step, configuration, whole, uncertainty);
  if (!whole.is_root()) return record;
  record.forces = forces;
  record.energy = label.energy;
  record.virial = label.virial;
  return record;
}

bool OnTheFlyTrainer::learn_walker_round(int64_t step, const LabelledFrame* label,
                                         bool at_step_end) {
  WalkerRound round;
  // A journal being replayed, or a label in flight (docs/design.md §14.1), may bring a label on
  // any step.
  const int64_t next_label_step =
      replay_ || in_flight_ ? step + 1 : policy_.earliest_label_step_after(step);
  agreed("sharing labels between walkers on step " + std::to_string(step), [&] {
    round = walkers_.round(label, at_step_end, stop_reason_, next_label_step);
  });
  if (!round.stop_reason.empty() && stop_reason_.empty()) stop_reason_ = round.stop_reason;
  if (round.all_at_step_end) next_walker_round_step_ = round.next_round_step;
  if (round.frame_count == 0) return round.all_at_step_end;
  // The guards count the other walkers' labels as learned too (this walker's own were counted
  // when judged).
  const int mine = walkers_.layout().walker;
  double others[4] = {0.0, 0.0, std::numeric_limits<double>::infinity(),
                      -std::numeric_limits<double>::infinity()};
  std::string from;
  if (rank_ == 0)
    for (std::size_t k = 0; k < round.frames.size(); ++k) {
      if (round.frame_walkers[k] == mine) continue;
      const LabelledFrame& frame = round.frames[k];
      others[0] += 1.0;
      for (const double f : frame.forces) others[1] = std::max(others[1], std::abs(f));
      if (frame.num_atoms() > 0) {
        const double per_atom = frame.energy / frame.num_atoms();
        others[2] = std::min(others[2], per_atom);
        others[3] = std::max(others[3], per_atom);
      }
      from += (from.empty() ? "" : ", ") + std::to_string(round.frame_walkers[k]);
    }
  MPI_Bcast(others, 4, MPI_DOUBLE, 0, world_);
  count_learned(static_cast<int64_t>(others[0]), others[1], others[2], others[3]);
  const int64_t skipped_before = session_->report().skipped_steps;
  std::vector<const LabelledFrame*> frames;
  for (const LabelledFrame& frame : round.frames) frames.push_back(&frame);
  learn_whole_frames(step, frames, round.frame_count);
  counters_.replicas_differ = !walkers_.same_everywhere(session_->weights_hash());
  if (counters_.replicas_differ && rank_ == 0 && messages_.warn)
    messages_.warn("the model replicas differ across the walkers' ranks on step " +
                   std::to_string(step));
  check_divergence(step, skipped_before);
  if (!from.empty() && messages_.log)
    messages_.log("step " + std::to_string(step) + ": learned the label(s) of walker(s) " + from);
  return false;
}

void OnTheFlyTrainer::learn_whole_frames(int64_t step,
                                         const std::vector<const LabelledFrame*>& frames,
                                         int64_t count) {
  Stopwatch timing(counters_.training_seconds);
  agreed("learning the label(s) of step " + std::to_string(step), [&] {
    snapshot_step_weights(step);
    const bool statistics_were_ready = session_->statistics_ready();
    std::vector<std::unique_ptr<WholeFramePart>> parts;
    for (int64_t k = 0; k < count; ++k) {
      parts.push_back(std::make_unique<WholeFramePart>(
          *session_, rank_ == 0 ? frames[static_cast<std::size_t>(k)] : nullptr, world_));
      session_->add_frame(parts.back()->part());
    }
    if (!statistics_were_ready && session_->statistics_ready()) log_statistics_frozen(step);
    session_->train();
    // As after a label of the step: the label fit, here of every frame in order (for walkers,
    // every label of the round in walker order, the same on every walker).
    const DriveCriterion* criterion = policy_.criterion();
    if (criterion && criterion->label_fit_force_error() > 0.0)
      for (const auto& part : parts) train_on_label(part->part());
    session_->validate();
  });
}

bool OnTheFlyTrainer::start_label_in_flight(int64_t step, MdFrameSource& md,
                                            double asked_value) {
  if (budget_refuses(step, ReferenceUse::Label)) return false;
  const ReferenceConfiguration configuration = md.reference_configuration();
  auto flight = std::make_unique<LabelInFlight>();
  flight->step = step;
  flight->asked_value = asked_value;
  flight->due = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(settings_.reference_delay));
  // The configuration whole on rank 0: the held-back answer's forces, the record and the
  // prediction are gathered by it.
  std::unique_ptr<FrameGather> whole;
  agreed("gathering the configuration of step " + std::to_string(step),
         [&] { whole = std::make_unique<FrameGather>(configuration, world_); });
  try {
    Stopwatch timing(counters_.reference_seconds);
    flight->answer = reference_.start_label(configuration);
    if (!flight->answer) {
      // A reference that computes only while its caller waits answers now; the answer is held
      // back for the rest of reference_delay, as an expensive one's would be.
      ReferenceLabel label = reference_.label(configuration, ReferenceUse::Label);
      agreed("gathering the label of step " + std::to_string(step), [&] {
        check_force_count(label.owned_forces.size(), configuration.num_local, "owned atoms");
        label.owned_forces = whole->gather(label.owned_forces.data(), 3);
      });
      flight->answer = std::make_unique<HeldBackLabel>(std::move(label));
    }
  } catch (const ReferenceFailure& failure) {
    skip_failed_label("step " + std::to_string(step) + ": label", failure);
    return false;
  }
  count_reference_call();
  const auto owned = static_cast<std::size_t>(configuration.num_local);
  agreed("keeping the configuration of step " + std::to_string(step), [&] {
    flight->frame = whole_configuration(step, configuration, *whole,
                                        journal_enabled() ? md.force_uncertainty_per_atom()
                                                          : nullptr);
    flight->prediction_kept = prediction_kept_ && predicted_forces_.size() == 3 * owned &&
                              predicted_spread_.size() == owned;
    if (!flight->prediction_kept) return;
    flight->predicted_forces = whole->gather(predicted_forces_.data(), 3);
    flight->predicted_spread = whole->gather(predicted_spread_.data(), 1);
    flight->predicted_energy = predicted_summary_.mean_energy;
    flight->energy_spread_per_atom = predicted_summary_.energy_spread_per_atom;
    flight->from_trained_model = prediction_from_trained_model_;
  });
  prediction_kept_ = false;
  in_flight_ = std::move(flight);
  log_row(step, "label_asked");
  return true;
}

void OnTheFlyTrainer::collect_label_in_flight(int64_t step, bool wait) {
  if (!in_flight_) return;
  int ready = rank_ == 0 && in_flight_->answer->ready() &&
                      std::chrono::steady_clock::now() >= in_flight_->due
                  ? 1
                  : 0;
  MPI_Bcast(&ready, 1, MPI_INT, 0, world_);
  if (!ready && !wait) return;
  const std::unique_ptr<LabelInFlight> flight = std::move(in_flight_);
  const DriveCriterion* criterion = policy_.criterion();
  const std::string asked = "the label of step " + std::to_string(flight->step);
  ReferenceLabel label;
  try {
    Stopwatch timing(counters_.reference_seconds);
    if (!ready) std::this_thread::sleep_until(flight->due);
    label = flight->answer->wait();
  } catch (const ReferenceFailure& failure) {
    skip_failed_label("step " + std::to_string(step) + ": " + asked, failure);
    log_row(step, "label_skipped");
    if (criterion && criterion->judges_label(true, false)) assess_label(step);
    return;
  }
  // Rank 0 holds the whole frame's forces, the other ranks none: the guards below reduce over
  // the ranks as for a label held in parts.
  LabelledFrame& frame = flight->frame;
  agreed("completing " + asked, [&] {
    if (rank_ != 0) return;
    check_force_count(label.owned_forces.size(),
                      static_cast<int64_t>(frame.positions.size() / 3), "atoms");
    frame.energy = label.energy;
    frame.virial = label.virial;
    frame.forces = label.owned_forces;
    if (journal_) journal_->append(frame);
  });
  const LabelVerdict verdict = judge_label_values(step, label, true);
  if (verdict != LabelVerdict::Learnable) {
    refused_label_hands_back(step, verdict);
    log_row(step, "label_skipped");
    if (criterion && criterion->judges_label(true, false)) assess_label(step);
    return;
  }
  if (compares_prediction() && flight->prediction_kept) {
    LabelErrorSample sample;
    sample.model_labels = counters_.learned_labels;
    if (rank_ == 0) {
      const std::size_t atoms = flight->predicted_spread.size();
      sample.force_spread = flight->predicted_spread;
      sample.force_error.resize(atoms);
      for (std::size_t i = 0; i < atoms && 3 * i + 2 < frame.forces.size(); ++i) {
        double sq = 0.0;
        for (std::size_t d = 0; d < 3; ++d) {
          const double e = flight->predicted_forces[3 * i + d] - frame.forces[3 * i + d];
          sq += e * e;
        }
        sample.force_error[i] = std::sqrt(sq);
      }
    }
    sample.energy_spread = flight->energy_spread_per_atom;
    add_calibration_sample(std::move(sample), flight->predicted_energy, label.energy,
                           flight->from_trained_model);
  }
  const LabelledFrame* whole = rank_ == 0 ? &frame : nullptr;
  if (walkers_.shared()) {
    learn_walker_round(step, whole, false);
  } else {
    const int64_t skipped_before = session_->report().skipped_steps;
    learn_whole_frames(step, {whole}, 1);
    check_replicas(step);
    check_divergence(step, skipped_before);
  }
  if (rank_ == 0 && messages_.log && flight->step != step)
    messages_.log("step " + std::to_string(step) + ": learned " + asked +
                  " (the MD went on while the reference computed it)");
  log_row(step, "label");
  if (criterion && criterion->judges_label(true, true)) assess_label(step);
}

void OnTheFlyTrainer::settle_labels_in_flight(int64_t step) {
  if (settings_.label_wait) return;
  collect_label_in_flight(step, true);
  // The other walkers' labels in flight: every walker at its step end joins their rounds.
  if (walkers_.shared())
    while (!learn_walker_round(step, nullptr, true)) {
    }
}

bool OnTheFlyTrainer::journal_enabled() const { return !settings_.journal_path.empty(); }

bool OnTheFlyTrainer::budget_spent() const {
  return settings_.max_reference_calls > 0 &&
         counters_.reference_calls >= settings_.max_reference_calls;
}

void OnTheFlyTrainer::log_row(int64_t step, const char* event) {
  if (settings_.learning_log_path.empty()) return;
  agreed("cannot write the learning log " + settings_.learning_log_path, [&] {
    if (rank_ != 0 || !learning_log_) return;
    const DriveCriterion* criterion = policy_.criterion();
    const double checked =
        criterion ? criterion->checked_value(measurement()) : counters_.max_uncertainty;
    learning_log_->append(learning_log_row(step, event, policy_.reference_drives(),
                                           session_->report(), counters_,
                                           session_->learning_rate(), checked,
                                           calibration_.force_scale()));
  });
}

bool OnTheFlyTrainer::label_and_train(int64_t step, const FramePart& frame, MdFrameSource& md,
                                      bool uncertainty_measured) {
  const ReferenceUse use =
      policy_.reference_drives() ? ReferenceUse::Drive : ReferenceUse::Label;
  ReferenceLabel label;
  if (!ask_reference(step, md, use, true, uncertainty_measured, label)) return false;
  const LabelVerdict verdict = judge_label_values(step, label, use == ReferenceUse::Label);
  if (verdict != LabelVerdict::Learnable) {
    prediction_kept_ = false;
    if (use == ReferenceUse::Label) refused_label_hands_back(step, verdict);
    return false;
  }
  if (compares_prediction() && prediction_kept_) record_calibration_sample(md, label);
  prediction_kept_ = false;
  Stopwatch timing(counters_.training_seconds);

  if (walkers_.shared()) {
    // Every walker learns the label, whole and in walker order, in one round.
    LabelledFrame whole;
    agreed("sharing the label of step " + std::to_string(step), [&] {
      whole = whole_label(step, md.reference_configuration(), label, nullptr);
    });
    learn_walker_round(step, rank_ == 0 ? &whole : nullptr, false);
    return true;
  }
  FramePart labelled = frame;
  labelled.owned_forces = label.owned_forces.data();
  labelled.energy = label.energy;
  labelled.virial = label.virial;
  const int64_t skipped_before = session_->report().skipped_steps;
  agreed("training on step " + std::to_string(step), [&] {
    check_force_count(label.owned_forces.size(), frame.system.num_local, "owned atoms");
    snapshot_step_weights(step);
    const bool statistics_were_ready = session_->statistics_ready();
    session_->add_frame(labelled);
    if (!statistics_were_ready && session_->statistics_ready()) log_statistics_frozen(step);
    session_->train();
    const DriveCriterion* criterion = policy_.criterion();
    if (criterion && criterion->label_fit_force_error() > 0.0) train_on_label(labelled);
    session_->validate();
  });
  check_replicas(step);
  check_divergence(step, skipped_before);
  return true;
}

void OnTheFlyTrainer::count_learned(int64_t labels, double largest_force, double lowest_per_atom,
                                    double highest_per_atom) {
  counters_.learned_labels += labels;
  counters_.largest_learned_force = std::max(counters_.largest_learned_force, largest_force);
  counters_.lowest_learned_energy_per_atom =
      std::min(counters_.lowest_learned_energy_per_atom, lowest_per_atom);
  counters_.highest_learned_energy_per_atom =
      std::max(counters_.highest_learned_energy_per_atom, highest_per_atom);
}

OnTheFlyTrainer::LabelVerdict OnTheFlyTrainer::judge_label_values(int64_t step,
                                                                  const ReferenceLabel& label,
                                                                  bool model_drove) {
  // [0]: largest |force component| on this rank, [1]: 1 when something is not finite.
  double local[2] = {0.0, std::isfinite(label.energy) ? 0.0 : 1.0};
  for (const double f : label.owned_forces) {
    if (!std::isfinite(f)) local[1] = 1.0;
    else local[0] = std::max(local[0], std::abs(f));
  }
  for (const double v : label.virial)
    if (!std::isfinite(v)) local[1] = 1.0;
  double whole[2] = {0.0, 0.0};
  MPI_Allreduce(local, whole, 2, MPI_DOUBLE, MPI_MAX, world_);
  long long atoms = static_cast<long long>(label.owned_forces.size() / 3);
  MPI_Allreduce(MPI_IN_PLACE, &atoms, 1, MPI_LONG_LONG, MPI_SUM, world_);
  const double largest = whole[0];
  const bool finite = whole[1] == 0.0;
  const bool guarded = settings_.outlier_factor > 0.0 &&
                       counters_.learned_labels >= TrainerSettings::kOutlierGuardLabels &&
                       counters_.largest_learned_force > 0.0;
  const double limit = settings_.outlier_factor * counters_.largest_learned_force;
  const bool force_outlier = finite && guarded && largest > limit;
  // The energy guard: only where the model drove (reference-driven MD, e.g. a structure relaxing
  // from its start, is physical by construction).
  const double per_atom = atoms > 0 ? label.energy / static_cast<double>(atoms) : 0.0;
  const double lowest = counters_.lowest_learned_energy_per_atom;
  const double highest = counters_.highest_learned_energy_per_atom;
  const bool energy_outlier = finite && !force_outlier && model_drove && outlier_energy_ > 0.0 &&
                              atoms > 0 && lowest <= highest &&
                              (per_atom < lowest - outlier_energy_ ||
                               per_atom > highest + outlier_energy_);
  if (finite && !force_outlier && !energy_outlier) {
    // Without atoms (no energy per atom) the range stays as it is.
    const double no_atoms_low = std::numeric_limits<double>::infinity();
    count_learned(1, largest, atoms > 0 ? per_atom : no_atoms_low,
                  atoms > 0 ? per_atom : -no_atoms_low);
    counters_.refused_labels_in_row = 0;
    return LabelVerdict::Learnable;
  }
  ++counters_.skipped_labels;
  ++counters_.refused_labels_in_row;
  std::string what;
  if (!finite) {
    what = "its energy, forces or virial are not finite";
  } else if (force_outlier) {
    what = formatted("its largest force component %.4g is more than %g x the largest of the "
                     "%.0f labels learned so far (%.4g)",
                     largest, settings_.outlier_factor,
                     static_cast<double>(counters_.learned_labels),
                     counters_.largest_learned_force);
  } else {
    char text[320];
    std::snprintf(text, sizeof(text),
                  "its energy per atom %.6g is more than %g beyond the range of the %lld labels "
                  "learned so far (%.6g to %.6g; outlier_energy)",
                  per_atom, outlier_energy_, static_cast<long long>(counters_.learned_labels),
                  lowest, highest);
    what = text;
  }
  const std::string why =
      energy_outlier
          ? std::string("the model drove the MD into a structure no temperature reaches (a "
                        "collapse or an explosion): a model that drove too long unchecked "
                        "(lower check_every or take_over), or a timestep too long")
          : std::string("the configuration is far from anything learned (atoms pushed into each "
                        "other?): a timestep too long, or a model that drove too long unchecked "
                        "(lower check_every or take_over)");
  if (counters_.refused_labels_in_row >= TrainerSettings::kMaxRefusedInRow)
    throw TrainingError("step " + std::to_string(step) + ": " +
                        std::to_string(counters_.refused_labels_in_row) +
                        " labels in a row were not learned; on the last, " + what + ". " +
                        "Stopped before the model learns from them: " + why +
                        " (outlier_factor and outlier_energy set the guard)");
  if (rank_ == 0 && messages_.warn)
    messages_.warn("step " + std::to_string(step) + ": label not learned, " + what + "; " + why);
  return finite ? LabelVerdict::Outlier : LabelVerdict::NotFinite;
}

void OnTheFlyTrainer::log_statistics_frozen(int64_t step) const {
  const StatisticsSummary summary = session_->statistics_summary();
  if (rank_ == 0 && messages_.log) messages_.log(statistics_frozen_line(step, summary));
}

void OnTheFlyTrainer::check_divergence(int64_t step, int64_t skipped_before) {
  const TrainingReport& report = session_->report();
  const int64_t skipped = report.skipped_steps - skipped_before;
  if (skipped == 0) return;
  const std::string precision = to_string(settings_.session.precision);
  // Under float16 skips while the GradScaler finds its scale are normal (they do not count as
  // consecutive); elsewhere a skipped step means inf/NaN loss or gradients.
  if (rank_ == 0 && messages_.warn && report.consecutive_skipped_steps > 0 &&
      report.consecutive_skipped_steps == skipped)
    messages_.warn("step " + std::to_string(step) + ": non-finite loss or gradients, " +
                   std::to_string(skipped) + " optimizer step(s) skipped (the weights are kept)");
  const int64_t limit = settings_.max_skipped_in_row;
  if (limit > 0 && report.consecutive_skipped_steps >= limit)
    throw TrainingError(
        "training diverged on step " + std::to_string(step) + ": the last " +
        std::to_string(report.consecutive_skipped_steps) +
        " optimizer steps had non-finite loss or gradients (precision " + precision +
        formatted(", learning rate %g", session_->learning_rate(), 0, 0, 0) +
        "); lower lr, gather descriptor statistics from more frames (stats_frames), or clip the "
        "gradients (clip); max_skips sets how many skipped steps in a row stop the run");
}

void OnTheFlyTrainer::measure_uncertainty(const FramePart& frame, MdFrameSource& md,
                                          bool keep_prediction) {
  Stopwatch timing(counters_.training_seconds);
  const auto owned = static_cast<std::size_t>(frame.system.num_local);
  agreed("measuring the force uncertainty", [&] {
    predicted_forces_.assign(keep_prediction ? 3 * owned : 0, 0.0);
    const CommitteeSpread spread = session_->committee_spread(
        frame, md.force_uncertainty_per_atom(), keep_prediction ? predicted_forces_.data() : nullptr);
    counters_.max_uncertainty = spread.max_force_spread;
    if (!compares_prediction()) return;
    counters_.predicted_force_error =
        calibration_.predicted_force_rmse(spread.mean_square_force_spread);
    counters_.predicted_energy_error =
        calibration_.predicted_energy_error(spread.energy_spread_per_atom);
    irreducible_force_error_ = calibration_.force_scale() * spread.force_noise;
    // The energy noise rests on one row per frame (and a prior tying it to the force noise), not
    // on hundreds: a floor known only from below, so the calibration's excess counts as
    // reducible (64-atom Si from DFT: a bias of 2.6 meV/atom from early labels was held
    // irreducible and never labelled away, examples/si64-cp2k).
    fit_noise_ = {spread.force_noise, spread.energy_noise};
    if (session_->fits_in_closed_form()) descriptor_spread_ = session_->descriptor_spread(frame);
    prediction_kept_ = keep_prediction;
    if (!keep_prediction) return;
    predicted_summary_ = spread;
    predicted_spread_.assign(md.force_uncertainty_per_atom(),
                             md.force_uncertainty_per_atom() + owned);
    // An untrained model's errors say nothing about how its spread relates to them, nor do those
    // of a model fitted in closed form to zero forces only (its posterior is confident without
    // reason: PosteriorAccuracy).
    prediction_from_trained_model_ = session_->report().optimizer_steps > 0 &&
                                     (!session_->fits_in_closed_form() || learned_forces());
  });
}

void OnTheFlyTrainer::record_calibration_sample(MdFrameSource& md, const ReferenceLabel& label) {
  const ReferenceConfiguration configuration = md.reference_configuration();
  LabelErrorSample sample;
  sample.model_labels = counters_.learned_labels;
  agreed("comparing the label with the model's prediction", [&] {
    const auto owned = static_cast<std::size_t>(configuration.num_local);
    if (label.owned_forces.size() != 3 * owned || predicted_forces_.size() != 3 * owned ||
        predicted_spread_.size() != owned)
      throw std::runtime_error("the prediction and the label differ in atoms");
    std::vector<double> error(owned);
    for (std::size_t i = 0; i < owned; ++i) {
      double sq = 0.0;
      for (std::size_t d = 0; d < 3; ++d) {
        const double e = predicted_forces_[3 * i + d] - label.owned_forces[3 * i + d];
        sq += e * e;
      }
      error[i] = std::sqrt(sq);
    }
    // Whole frame in atom-id order on rank 0 (then on every rank, so every rank calibrates alike).
    const FrameGather whole(configuration, world_);
    sample.force_spread = whole.gather(predicted_spread_.data(), 1);
    sample.force_error = whole.gather(error.data(), 1);
  });
  sample.energy_spread = predicted_summary_.energy_spread_per_atom;
  add_calibration_sample(std::move(sample), predicted_summary_.mean_energy, label.energy,
                         prediction_from_trained_model_);
}

void OnTheFlyTrainer::add_calibration_sample(LabelErrorSample sample, double predicted_energy,
                                             double label_energy, bool from_trained_model) {
  agreed("comparing the label with the model's prediction", [&] {
    long long atoms = static_cast<long long>(sample.force_spread.size());
    MPI_Bcast(&atoms, 1, MPI_LONG_LONG, 0, world_);
    sample.force_spread.resize(static_cast<std::size_t>(atoms));
    sample.force_error.resize(static_cast<std::size_t>(atoms));
    MPI_Bcast(sample.force_spread.data(), static_cast<int>(atoms), MPI_DOUBLE, 0, world_);
    MPI_Bcast(sample.force_error.data(), static_cast<int>(atoms), MPI_DOUBLE, 0, world_);
    const double count = static_cast<double>(std::max<long long>(atoms, 1));
    sample.energy_error = std::abs(predicted_energy - label_energy) / count;
    double sq = 0.0;
    for (const double e : sample.force_error) sq += e * e;
    counters_.label_force_error = std::sqrt(sq / (3.0 * count));
    counters_.label_energy_error = sample.energy_error;
    counters_.label_atoms_above_bound = -1.0;
    if (calibration_.samples() > 0) {
      const double bound = calibration_.force_bound90_factor();
      std::size_t above = 0;
      for (std::size_t i = 0; i < sample.force_error.size(); ++i)
        above += sample.force_error[i] > bound * sample.force_spread[i];
      counters_.label_atoms_above_bound = static_cast<double>(above) / count;
    }
  });
  if (!from_trained_model) return;
  if (counters_.label_atoms_above_bound >= 0.0)
    calibration_.record_bound_outcome(counters_.label_atoms_above_bound);
  calibration_.add(std::move(sample));
}

void OnTheFlyTrainer::train_on_label(const FramePart& labelled) {
  // A closed-form fit learned the label completely already.
  if (!session_->statistics_ready() || session_->fits_in_closed_form()) return;
  const int64_t round = std::max<int64_t>(settings_.session.steps_per_frame, 1);
  const double fitted = policy_.criterion()->label_fit_force_error();
  std::vector<double> spread(static_cast<std::size_t>(labelled.system.num_local));
  std::vector<double> mean(3 * spread.size());
  for (int64_t done = round; done + round <= settings_.label_steps; done += round) {
    session_->committee_spread(labelled, spread.data(), mean.data());
    double sq = 0.0;
    for (std::size_t k = 0; k < mean.size(); ++k) {
      const double e = mean[k] - labelled.owned_forces[k];
      sq += e * e;
    }
    double sums[2] = {sq, static_cast<double>(mean.size())};
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, world_);
    if (sums[1] > 0.0 && std::sqrt(sums[0] / sums[1]) <= fitted) break;
    session_->train();
  }
}

void OnTheFlyTrainer::check_replicas(int64_t step) {
  const unsigned long long hash = session_->weights_hash();
  unsigned long long low = 0, high = 0;
  MPI_Allreduce(&hash, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, world_);
  MPI_Allreduce(&hash, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, world_);
  counters_.replicas_differ = low != high;
  if (counters_.replicas_differ && rank_ == 0 && messages_.warn)
    messages_.warn("the model replicas differ across ranks on step " + std::to_string(step));
}

void OnTheFlyTrainer::save_model(int64_t step, const char* why) {
  std::string message;
  // Walkers hold identical replicas: walker 0 writes the one file.
  const bool writes = walkers_.layout().walker == 0;
  if (rank_ == 0 && writes) {
    try {
      session_->save(settings_.save_path);
    } catch (std::exception& e) {
      message = e.what();
      if (message.empty()) message = "unknown error";
    }
  }
  // Every walker waits for walker 0's file (the input may read it next) and hears its outcome.
  message = walkers_.from_first_walker(message);
  if (!message.empty()) throw TrainingError("cannot save the model: " + message);
  counters_.last_saved_step = step;
  if (rank_ == 0 && messages_.log)
    messages_.log("step " + std::to_string(step) + ": model saved to " + settings_.save_path +
                  (writes ? "" : " by walker 0") +
                  " (" + why + ", " + std::to_string(session_->report().optimizer_steps) +
                  " optimizer steps)");
}

void OnTheFlyTrainer::snapshot_step_weights(int64_t step) {
  // The weights this step's forces came from, for a restart file written on this step: taken
  // before the step's first training only (walkers may train several rounds in one step).
  if (weights_snapshot_step_ == step) return;
  session_->snapshot_weights();
  weights_snapshot_step_ = step;
}

std::string OnTheFlyTrainer::save_restart(int64_t step) {
  // A restart file holds no label in flight: it is waited for and learned first.
  settle_labels_in_flight(step);
  TrainerRestart restart;
  std::string buffer;
  agreed("cannot save the training state for the restart file", [&] {
    restart.session = session_->save_state(weights_snapshot_step_ == step);
    buffer = session_->save_buffer_state();
    if (buffer.size() > static_cast<std::size_t>(INT_MAX))
      throw std::runtime_error("the replay buffer is too large for a restart file");
  });
  // Every rank's replay buffer part, gathered to rank 0.
  int size = static_cast<int>(buffer.size());
  std::vector<int> sizes(static_cast<std::size_t>(ranks_), 0), offsets(sizes.size(), 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, world_);
  long long total = 0;
  for (int p = 0; p < ranks_; ++p) {
    offsets[static_cast<std::size_t>(p)] = static_cast<int>(total);
    total += sizes[static_cast<std::size_t>(p)];
  }
  int too_large = rank_ == 0 && total > INT_MAX ? 1 : 0;
  MPI_Bcast(&too_large, 1, MPI_INT, 0, world_);
  if (too_large) throw TrainingError("the replay buffers are too large for a restart file");
  std::string all_buffers(rank_ == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  MPI_Gatherv(buffer.data(), size, MPI_CHAR, &all_buffers[0], sizes.data(), offsets.data(),
              MPI_CHAR, 0, world_);
  if (rank_ != 0) return {};
  for (int p = 0; p < ranks_; ++p)
    restart.rank_buffers.push_back(all_buffers.substr(
        static_cast<std::size_t>(offsets[static_cast<std::size_t>(p)]),
        static_cast<std::size_t>(sizes[static_cast<std::size_t>(p)])));
  restart.policy = policy_.state();
  restart.counters = counters_;
  // Frames still to be replayed stay after the recorded point, so a resume from this file
  // replays them too.
  try {
    restart.counters.journal_bytes = replay_    ? replay_->next_offset()
                                     : journal_ ? journal_->size_bytes()
                                                : -1;
  } catch (const std::exception&) {
    restart.counters.journal_bytes = -1;  // no replay from this file; the journal keeps its labels
  }
  restart.calibration = calibration_.encode();
  restart.calibration_labels = calibration_.encode_model_labels();
  return encode_restart(restart);
}

std::string OnTheFlyTrainer::load_restart(const TrainerRestart& restart) {
  policy_.restore(restart.policy);
  counters_ = restart.counters;
  restored_step_ = restart.policy.last_counted_step;
  replay_.reset();
  if (journal_enabled() && restart.counters.journal_bytes >= 0) {
    // Collective; throws TrainingError alike on every rank.
    replay_ =
        std::make_unique<JournalReplay>(settings_.journal_path, restart.counters.journal_bytes,
                                        restart.counters.reference_calls, world_);
    if (replay_->finished()) {
      replay_.reset();
    } else if (replay_->pending() > 0 && rank_ == 0 && messages_.log) {
      messages_.log(
          "label journal " + settings_.journal_path + ": " + std::to_string(replay_->pending()) +
          " label(s) journalled after the restart file (steps " +
          std::to_string(replay_->first_step()) + " to " + std::to_string(replay_->last_step()) +
          ") are replayed as the MD reaches them, without new reference calls");
    }
  }
  if (!restart.calibration.empty())
    agreed("cannot restore the error calibration from the restart file",
           [&] {
             calibration_.decode(restart.calibration);
             calibration_.decode_model_labels(restart.calibration_labels);
           });
  // Written before the fix's first run: counters only.
  if (restart.session.empty()) return "fix state restored from the restart file (no training yet)";
  restored_ = true;
  agreed("cannot restore the training state from the restart file", [&] {
    session_->load_state(restart.session);
    // Until setup() has evaluated this step's forces (finish_restart_setup()).
    swap_back_after_setup_ = session_->swap_snapshot_weights();
    if (!swap_back_after_setup_) session_->clear_snapshot();
  });
  const int written_ranks = static_cast<int>(restart.rank_buffers.size());
  if (written_ranks == ranks_) {
    agreed("cannot restore the replay buffer from the restart file", [&] {
      session_->load_buffer_state(restart.rank_buffers[static_cast<std::size_t>(rank_)]);
    });
  } else if (rank_ == 0 && messages_.warn) {
    messages_.warn("the restart file was written by " + std::to_string(written_ranks) +
                   " MPI ranks, this run has " + std::to_string(ranks_) +
                   ": the replay buffer (each rank's part of the frames) is dropped and starts "
                   "empty; the model and training state are restored");
  }
  return "training state restored from the restart file (" +
         std::to_string(session_->report().optimizer_steps) + " optimizer steps, " +
         std::to_string(session_->report().buffer_frames) + " frames in the replay buffer)";
}

void OnTheFlyTrainer::finish_restart_setup() {
  if (!swap_back_after_setup_) return;
  swap_back_after_setup_ = false;
  session_->swap_snapshot_weights();
  session_->clear_snapshot();
}

}  // namespace otf

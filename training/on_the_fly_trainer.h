// On-the-fly training, one MD step at a time: the policy decides (on_the_fly_policy.h), the
// reference labels (reference.h), the training session learns (training_session.h); the MD code
// only supplies the configuration (MdFrameSource) and reports what it is told. Models are saved
// atomically on schedule, and the whole state goes into one restart archive (restart_archive.h).
// No LibTorch or LAMMPS types in this header.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "error_calibration.h"
#include "on_the_fly_policy.h"
#include "rank_agreement.h"
#include "reference.h"
#include "restart_archive.h"
#include "training_session.h"
#include "walker_exchange.h"

namespace otf {

class FrameGather;
class JournalReplay;
class LabelJournalWriter;
class LearningLog;
struct LabelInFlight;

// What the MD code provides on the steps that need it. Borrowed data stays valid until the next
// call.
class MdFrameSource {
 public:
  virtual ~MdFrameSource() = default;
  // The rank's part of the current configuration (centres, neighbours, the owners of its
  // ghosts), without labels. Collective: every rank calls it on the same steps (the MD code may
  // communicate to name the ghosts' owners).
  virtual FramePart describe_frame() = 0;
  // The rank's owned atoms, for the reference.
  virtual ReferenceConfiguration reference_configuration() = 0;
  // Where the per-atom force uncertainty of the owned atoms goes ([num_local]).
  virtual double* force_uncertainty_per_atom() = 0;
  // Makes these the MD forces of the step's owned atoms ([num_local][3]): a label the journal
  // held, replayed while the reference drives (training/journal_replay.h).
  virtual void drive_with(const std::vector<double>& owned_forces) = 0;
};

struct TrainerSettings {
  TrainingSessionSettings session;
  PolicySettings policy;
  std::string save_path;       // empty: no model file
  int64_t save_every = 0;      // 0: at the end of a run only
  // Training has diverged after this many optimizer steps in a row were skipped for inf/NaN
  // loss or gradients: the run stops with an error (0: never).
  int64_t max_skipped_in_row = 20;
  // The label journal (training/label_journal.h): every reference answer is appended there, on
  // disk, before it is used. Empty: no journal.
  std::string journal_path;
  // Extended-XYZ files whose labelled frames fill the replay buffer (and are trained on) before
  // the first step of a run that does not continue from a restart file.
  std::vector<std::string> warm_start_paths;
  // The MD code's unit style (journal records and warm-start checks) and the chemical symbol of
  // each MD type (index 0 unused; empty for a type the model ignores).
  std::string unit_style = "metal";
  std::vector<std::string> type_elements;
  // A budget of reference calls (0: none). When it is spent the run is asked to stop
  // (stop_requested()), or, with budget_stops_run false, no more labels are asked for while the
  // model drives (the run stops only when the reference would have to drive).
  int64_t max_reference_calls = 0;
  bool budget_stops_run = true;
  // CSV learning curves (training/learning_log.h); empty: none.
  std::string learning_log_path;
  // drive auto by accuracy: after a label, training goes on in rounds of steps_per_frame
  // optimizer steps until the committee mean's force error on the new label is at most half the
  // force target, up to label_steps optimizer steps in all (0: one round, as without accuracy).
  int64_t label_steps = 16;
  // Labels whose prediction calibrates the committee's spread (training/error_calibration.h).
  int64_t calibration_window = 40;
  // The outlier guard: once kOutlierGuardLabels labels were learned, a label whose largest force
  // component exceeds outlier_factor times the largest among them is not learned (the MD reached
  // a configuration far from anything seen, such as atoms pushed into each other); neither is
  // one with a non-finite energy, force or virial. kMaxRefusedInRow such labels in a row stop
  // the run. 0: only non-finite labels are refused.
  double outlier_factor = 20.0;
  static constexpr int64_t kOutlierGuardLabels = 10;
  // The energy guard, for configurations the model drove to: a label whose energy per atom lies
  // more than outlier_energy (energy units of the MD run) below the lowest or above the highest
  // of the learned labels' is not learned (a model that drove the MD into a collapsed or exploded
  // structure, which no temperature reaches); under drive auto the reference drives again. Unset:
  // 1 eV per atom in the run's unit style (off for lj); 0: off.
  std::optional<double> outlier_energy;
  static constexpr int64_t kMaxRefusedInRow = 3;
  // Seconds each reference call is made to last at least (0: as long as it takes): an expensive
  // reference emulated by a cheap one, for benchmarks of calls and wall time.
  double reference_delay = 0.0;
  // Under drive auto, whether the MD waits for a label asked for while the model drives (true),
  // or goes on with the current model while the reference computes it and learns it when it is
  // there (false; docs/design.md §14.1). One such label at a time per walker.
  bool label_wait = true;
};

// The energy guard's default: 1 eV per atom in the unit style; 0 (off) for a unit style without a
// physical scale (lj).
double default_outlier_energy(const std::string& unit_style);

// The trainer's own rules (save_every and its file, max_skips, max_calls, label_steps,
// calibration_window, outlier_factor, outlier_energy), named by the fix otf/train keywords. Throws
// std::invalid_argument.
void check_trainer_fields(const TrainerSettings& settings);
// Every rule of the settings: the trainer's own, the policy's (check_policy_settings) and the
// session's (check_session_settings), each checked by its owner.
void check_trainer_settings(const TrainerSettings& settings);

// Rank 0 prints what it is given; the MD code routes it to its log and warnings.
struct TrainerMessages {
  std::function<void(const std::string&)> log;
  std::function<void(const std::string&)> warn;
};

class OnTheFlyTrainer {
 public:
  // Collective. Throws TrainingError for settings the engine rejects. Rank 0 logs what the run
  // does (trainer_narration.h). walkers: the walkers (MD code partitions) that train this model
  // together (walker_exchange.h); every on_step() is then collective over all of them, and each
  // walker writes its own label journal and learning log (walker_file_path), walker 0 the model.
  OnTheFlyTrainer(std::shared_ptr<Potential> potential, const TrainerSettings& settings,
                  Reference& reference, MPI_Comm world, TrainerMessages messages,
                  const WalkerLayout& walkers = {});
  ~OnTheFlyTrainer();
  OnTheFlyTrainer(const OnTheFlyTrainer&) = delete;
  OnTheFlyTrainer& operator=(const OnTheFlyTrainer&) = delete;

  // Collective: everything one MD step needs (reference forces, labels, training, uncertainty
  // checks, hand-overs, scheduled saves). Call after the MD forces of the step are computed.
  // last_of_run: the MD code's run ends with this step (a label in flight is learned on it, so
  // that the step's outputs show it).
  void on_step(int64_t step, MdFrameSource& md, bool last_of_run = false);
  // Collective: saves the model at the end of a run (unless saved on this step) and logs how the
  // frames were split over the ranks and, for a calibrating criterion, the calibration.
  void end_of_run(int64_t step);

  // Collective: the restart archive, complete on rank 0 (every rank's replay buffer part is
  // gathered there); other ranks get an empty string. `step` is the current step.
  std::string save_restart(int64_t step);
  // Collective, the same bytes on every rank. Throws RestartFormatError or TrainingError.
  // Returns a line for the log.
  std::string load_restart(const TrainerRestart& restart);

  const TrainingSession& session() const { return *session_; }
  const OnTheFlyPolicy& policy() const { return policy_; }
  const TrainerCounters& counters() const { return counters_; }
  bool reference_drives() const { return policy_.reference_drives(); }
  const Reference& reference() const { return reference_; }
  const ErrorCalibration& calibration() const { return calibration_; }
  // A line for the log: the calibration's factors and how well the spread ranked the errors.
  std::string calibration_summary() const;
  // The run should end after this step (the reference-call budget); why, for the log.
  bool stop_requested() const { return !stop_reason_.empty(); }
  const std::string& stop_reason() const { return stop_reason_; }
  // The weights the restarted step's forces came from are in the model until setup() has
  // evaluated them; this puts the trained ones back (no-op otherwise).
  void finish_restart_setup();

 private:
  // Returns whether the configuration was labelled (false: the reference failed or the budget
  // is spent).
  bool label_and_train(int64_t step, const FramePart& frame, MdFrameSource& md,
                       bool uncertainty_measured);
  // Collective: asks the reference and, the first time the step is seen, counts and journals
  // its answer. Returns false when the reference failed while the model drives (the label is
  // skipped and counted) or the budget is spent; throws TrainingError when it failed while the
  // reference drives.
  bool ask_reference(int64_t step, MdFrameSource& md, ReferenceUse use, bool first_time,
                     bool uncertainty_measured, ReferenceLabel& label);
  // Resuming after a kill: the journal's frames the resumed MD went past are learned (counted as
  // the reference calls they were); with every_one, all that are left.
  void learn_missed_labels(int64_t step, bool every_one);
  void record_label(int64_t step, const ReferenceConfiguration& configuration,
                    const ReferenceLabel& label, const double* uncertainty);
  bool journal_enabled() const;
  bool budget_spent() const;
  std::string budget_spent_text() const;
  // With the reference-call budget spent: notes it (no more labels, or the run stops, as
  // max_calls says) and returns true.
  bool budget_refuses(int64_t step, ReferenceUse use);
  // Throws std::runtime_error unless a label has 3 force components per atom ("owned atoms").
  void check_force_count(std::size_t components, int64_t atoms, const char* which) const;
  // A call paid for: counted; once the budget is spent the run is asked to stop (max_calls stop).
  void count_reference_call();
  // A label the reference could not give while the model drives: counted, warned about ("<which>
  // skipped, the model drives on ..."); the model drives on.
  void skip_failed_label(const std::string& which, const ReferenceFailure& failure);
  // Rank 0 writes a row of the learning log (when there is one).
  void log_row(int64_t step, const char* event);
  // The committee on the frame: the per-atom force uncertainty into md, the calibrated errors
  // into the counters; with keep_prediction also the committee mean's forces and energy, for
  // comparing with the label that follows (record_calibration_sample).
  void measure_uncertainty(const FramePart& frame, MdFrameSource& md,
                           bool keep_prediction = false);
  void record_calibration_sample(MdFrameSource& md, const ReferenceLabel& label);
  // The calibration sample of a label whose per-atom spread and force error are whole on rank 0
  // (broadcast here); from_trained_model: the prediction came from a trained model.
  void add_calibration_sample(LabelErrorSample sample, double predicted_energy, double label_energy,
                              bool from_trained_model);
  // label_wait no (docs/design.md §14.1). Collective: asks the reference for a label of the
  // step in the background (a reference that cannot is asked now and its answer held back until
  // reference_delay has passed). Returns false when no call was made (a failure, the budget).
  // asked_value: the drive criterion's value on the check that asked for it.
  bool start_label_in_flight(int64_t step, MdFrameSource& md, double asked_value);
  // Collective: learns the label in flight when its answer is there, or with wait, after waiting
  // for it; no-op without one. Walkers: a round with the label.
  void collect_label_in_flight(int64_t step, bool wait);
  // Collective over every walker: the labels in flight of all walkers learned (end of a run, a
  // restart file), every walker at its step end.
  void settle_labels_in_flight(int64_t step);
  // Collective: trains on frames held whole by rank 0 (null elsewhere), as a walker round does.
  void learn_whole_frames(int64_t step, const std::vector<const LabelledFrame*>& frames,
                          int64_t count);
  // Accuracy mode: more rounds of training until the new label is fitted (label_steps).
  void train_on_label(const FramePart& labelled);
  void snapshot_step_weights(int64_t step);
  // After a label under drive auto: asks the policy and says what it decided.
  void assess_label(int64_t step);
  // Whether the drive criterion compares each label with the committee's prediction of it.
  bool compares_prediction() const;
  // The committee at the last measurement, as the drive criterion reads it.
  DriveMeasurement measurement() const;
  // Whether a learned label had non-zero forces.
  bool learned_forces() const;
  // Rank 0 warns once when the accuracy asked for is below what the model's fit can reach.
  void note_noise_floor(int64_t step, const DriveMeasurement& measured);
  // Collective: Learnable when the label is finite and within the outlier guard; otherwise
  // warns, counts it and says why not (throws TrainingError after kMaxRefusedInRow refusals in a
  // row). model_drove: the configuration is one the model drove to (the energy guard applies).
  enum class LabelVerdict { Learnable, NotFinite, Outlier };
  // Adds learned labels to the guards' counters: how many, their largest force component and the
  // range of their energies per atom (lowest > highest: none).
  void count_learned(int64_t labels, double largest_force, double lowest_per_atom,
                     double highest_per_atom);
  LabelVerdict judge_label_values(int64_t step, const ReferenceLabel& label, bool model_drove);
  // After a refused label of a configuration the model drove to: an outlier gives the MD back to
  // the reference under drive auto (OnTheFlyPolicy::after_refused_label), said in the log.
  void refused_label_hands_back(int64_t step, LabelVerdict verdict);
  void check_replicas(int64_t step);
  // The configuration whole on rank 0 (empty elsewhere), without its label.
  LabelledFrame whole_configuration(int64_t step, const ReferenceConfiguration& configuration,
                                    const FrameGather& whole, const double* uncertainty) const;
  // The label of the step whole on rank 0 (empty elsewhere), as the journal and the walkers take it.
  LabelledFrame whole_label(int64_t step, const ReferenceConfiguration& configuration,
                            const ReferenceLabel& label, const double* uncertainty) const;
  // Collective over all walkers: one round of the walkers' labels (walker_exchange.h), learned
  // here in walker order. label: this walker's (rank 0), or null. Returns whether every walker
  // has finished the step.
  bool learn_walker_round(int64_t step, const LabelledFrame* label, bool at_step_end);
  // Rank 0 says where the descriptor statistics came from, when they were just frozen.
  void log_frame_parts() const;
  void log_statistics_frozen(int64_t step) const;
  void check_divergence(int64_t step, int64_t skipped_before);
  void save_model(int64_t step, const char* why);
  template <typename Body> void agreed(const std::string& what, Body&& body);

  TrainerSettings settings_;
  Reference& reference_;
  MPI_Comm world_;
  WalkerExchange walkers_;
  int rank_ = 0;
  int ranks_ = 1;
  TrainerMessages messages_;
  std::unique_ptr<TrainingSession> session_;
  OnTheFlyPolicy policy_;
  TrainerCounters counters_;
  bool swap_back_after_setup_ = false;
  bool run_started_ = false;        // the first on_step() of this trainer has happened
  bool restored_ = false;           // the state came from a restart file
  std::unique_ptr<LabelJournalWriter> journal_;  // rank 0, with a journal path
  std::unique_ptr<JournalReplay> replay_;        // resumed from a restart file with a journal
  std::unique_ptr<LearningLog> learning_log_;      // rank 0, with a learning log path
  int64_t restored_step_ = -1;                     // the step of the restart file, if any
  std::string stop_reason_;
  bool budget_noted_ = false;
  ErrorCalibration calibration_;
  // The prediction kept by measure_uncertainty(keep_prediction): per owned atom the spread and
  // the committee mean's forces, and the whole frame's committee energy summary.
  bool prediction_kept_ = false;
  // The step whose MD forces the snapshot's weights gave (the first training of that step, a
  // label of this walker or of another); a restart file written on it keeps them.
  int64_t weights_snapshot_step_ = -1;
  // Walkers: the step before which no walker brings a label (WalkerRound::next_round_step).
  int64_t next_walker_round_step_ = 0;
  bool prediction_from_trained_model_ = false;
  std::vector<double> predicted_spread_, predicted_forces_;
  CommitteeSpread predicted_summary_;
  // A model fitted in closed form: the calibrated part of the last predicted errors that no
  // label removes (measure_uncertainty), and whether the warning about it was given.
  TrainingSession::DescriptorSpread descriptor_spread_;  // at the last check (closed form)
  double irreducible_force_error_ = 0.0;
  struct {
    double force = 0.0, energy = 0.0;
  } fit_noise_;  // of a model fitted in closed form, uncalibrated
  bool noise_floor_noted_ = false;
  double outlier_energy_ = 0.0;  // settings_.outlier_energy resolved for the unit style
  std::unique_ptr<LabelInFlight> in_flight_;  // label_wait no: the label being computed
};

}  // namespace otf

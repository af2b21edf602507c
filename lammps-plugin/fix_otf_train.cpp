/* ----------------------------------------------------------------------
   OTF-Torch: fix otf/train (doc/fix_otf_train.md).

   Labelling: on a labelled step post_force() sets atom->f aside, lets the
   reference pair style compute energy, forces and virial from zero (ghost
   forces folded onto owners with newton on), reads the owned forces as
   labels and puts atom->f back bit for bit: the MD never sees the reference.
   The frame on one rank: the owned atoms as centres, ghost forces folded onto
   the atoms they are images of. On several ranks: the rank's owned atoms and,
   as centres that move them but whose energies count elsewhere, the ghost
   atoms within the model cutoff of an owned atom; the ghost cutoff is raised
   to 2 x cutoff + skin so that those ghost centres have complete
   neighbourhoods (potential_training.h).
------------------------------------------------------------------------- */

#include "fix_otf_train.h"

#include "otf_rank_agreement.h"

#include "otf_model_session.h"
#include "otf_training_session.h"
#include "pair_otf.h"
#ifdef OTF_WITH_KOKKOS
#include "pair_otf_kokkos_factory.h"
#endif

#include "atom.h"
#include "atom_masks.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "neigh_list.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "pair.h"
#include "update.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <unordered_map>

using namespace LAMMPS_NS;
using namespace FixConst;

namespace {

const char *const kSyntax =
    "fix ID all otf/train reference \"<pair_style args>\" coeff \"<pair_coeff args>\" "
    "[coeff \"...\"]... [keyword value ...]";
const char *const kKeywords =
    "precision, every, steps_per_frame, batch, lr, optimizer, weights, buffer, validation, "
    "seed, clip, scale_init, scale_growth, scale_backoff, scale_interval, save, save_every, "
    "stats_frames, drive, thresholds, check_every, lr_schedule, accumulate, ema";
constexpr int kVectorSize = 15;

// Restart blob (after LAMMPS' own int size): tag, format version, payload length, payload.
constexpr char kRestartTag[8] = {'O', 'T', 'F', 'T', 'R', 'A', 'I', 'N'};
constexpr uint32_t kRestartVersion = 2;    // 2: drive state and auto counters

void append_bytes(std::string &out, const void *data, size_t size)
{
  out.append(static_cast<const char *>(data), size);
}
template <typename T> void append_value(std::string &out, const T &value)
{
  append_bytes(out, &value, sizeof(T));
}
void append_string(std::string &out, const std::string &value)
{
  append_value<uint64_t>(out, value.size());
  out.append(value);
}

}    // namespace

/* ---------------------------------------------------------------------- */

FixOTFTrain::FixOTFTrain(LAMMPS *lmp, int narg, char **arg) :
    Fix(lmp, narg, arg), settings_(std::make_unique<otf::TrainingSessionSettings>())
{
  vector_flag = 1;
  size_vector = kVectorSize;
  global_freq = 1;
  extvector = 0;
  restart_global = 1;
  peratom_flag = 1;
  size_peratom_cols = 0;
  peratom_freq = 1;

  if (igroup != 0)
    error->all(FLERR, "fix otf/train: the group must be 'all' (got '{}'): the reference "
                      "energy labels the whole system", arg[1]);
  if (narg < 7 || strcmp(arg[3], "reference") != 0)
    error->all(FLERR, "Illegal fix otf/train command: expected {}", kSyntax);

  const auto style_words = utils::split_words(arg[4]);
  if (style_words.empty())
    error->all(FLERR, "fix otf/train: the reference needs a pair style, e.g. reference "
                      "\"lj/cut 8.5\"");
  reference_style_ = style_words[0];
  reference_settings_.assign(style_words.begin() + 1, style_words.end());
  // The model cannot be its own reference, also not as a part of a hybrid reference.
  for (const auto &word : style_words)
    if (utils::strmatch(word, "^otf"))
      error->all(FLERR, "fix otf/train: the reference may not use pair style '{}' (the model); "
                        "use another style: lj/cut, sw, tersoff, eam/alloy, snap, hybrid/overlay "
                        "of those, ...", word);

  int iarg = 5;
  while (iarg < narg && strcmp(arg[iarg], "coeff") == 0) {
    if (iarg + 1 >= narg)
      error->all(FLERR, "fix otf/train: 'coeff' needs a quoted pair_coeff line, e.g. "
                        "coeff \"* * 0.0104 3.405\"");
    reference_coeffs_.push_back(utils::split_words(arg[iarg + 1]));
    iarg += 2;
  }
  if (reference_coeffs_.empty())
    error->all(FLERR, "fix otf/train: at least one coeff \"<pair_coeff args>\" must follow "
                      "the reference ({})", kSyntax);
  parse_keywords(narg, arg, iarg);
  create_reference();

  FixOTFTrain::grow_arrays(atom->nmax);
  atom->add_callback(Atom::GROW);
  for (int i = 0; i < atom->nmax; i++) force_uncertainty_[i] = 0.0;
}

/* ---------------------------------------------------------------------- */

FixOTFTrain::~FixOTFTrain()
{
  atom->delete_callback(id, Atom::GROW);
  memory->destroy(force_uncertainty_);
  session_.reset();
  delete reference_;
  memory->destroy(saved_forces_);
  memory->destroy(atom_species_);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::parse_keywords(int narg, char **arg, int iarg)
{
  otf::TrainingSessionSettings &s = *settings_;
  auto value = [&](int count) {
    if (iarg + count >= narg)
      error->all(FLERR, "fix otf/train: keyword '{}' needs {} value(s)", arg[iarg], count);
  };
  while (iarg < narg) {
    const std::string keyword = arg[iarg];
    if (keyword == "precision") {
      value(1);
      std::string message;
      try {
        s.precision = otf::canonical_precision_name(arg[iarg + 1]);
      } catch (std::exception &e) {
        message = e.what();
      }
      if (!message.empty()) error->all(FLERR, "fix otf/train: {}", message);
      iarg += 2;
    } else if (keyword == "every") {
      value(1);
      label_every_ = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (label_every_ < 1) error->all(FLERR, "fix otf/train: every must be >= 1");
      iarg += 2;
    } else if (keyword == "steps_per_frame") {
      value(1);
      s.steps_per_frame = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.steps_per_frame < 0) error->all(FLERR, "fix otf/train: steps_per_frame must be >= 0");
      iarg += 2;
    } else if (keyword == "batch") {
      value(1);
      s.batch_frames = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.batch_frames < 1) error->all(FLERR, "fix otf/train: batch must be >= 1 frame");
      iarg += 2;
    } else if (keyword == "lr") {
      value(1);
      s.learning_rate = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (!(s.learning_rate >= 0.0)) error->all(FLERR, "fix otf/train: lr must be >= 0");
      iarg += 2;
    } else if (keyword == "optimizer") {
      value(1);
      // Checked by the engine's parser (any case) when the training session is set up.
      s.optimizer = arg[iarg + 1];
      iarg += 2;
    } else if (keyword == "weights") {
      value(3);
      s.energy_weight = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      s.force_weight = utils::numeric(FLERR, arg[iarg + 2], false, lmp);
      s.stress_weight = utils::numeric(FLERR, arg[iarg + 3], false, lmp);
      if (s.energy_weight < 0.0 || s.force_weight < 0.0 || s.stress_weight < 0.0 ||
          s.energy_weight + s.force_weight + s.stress_weight <= 0.0)
        error->all(FLERR, "fix otf/train: weights E F S must be >= 0 and not all 0");
      iarg += 4;
    } else if (keyword == "buffer") {
      value(1);
      s.buffer_frames = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.buffer_frames < 1) error->all(FLERR, "fix otf/train: buffer must be >= 1 frame");
      iarg += 2;
    } else if (keyword == "validation") {
      value(1);
      s.validation_fraction = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.validation_fraction < 0.0 || s.validation_fraction > 0.5)
        error->all(FLERR, "fix otf/train: validation must be in [0, 0.5] (got {})",
                   s.validation_fraction);
      iarg += 2;
    } else if (keyword == "seed") {
      value(1);
      const int seed = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (seed < 0) error->all(FLERR, "fix otf/train: seed must be >= 0");
      s.seed = static_cast<uint64_t>(seed);
      iarg += 2;
    } else if (keyword == "clip") {
      value(1);
      s.clip_max_norm = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.clip_max_norm < 0.0) error->all(FLERR, "fix otf/train: clip must be >= 0 (0: off)");
      iarg += 2;
    } else if (keyword == "scale_init") {
      value(1);
      s.scale_init = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (!(s.scale_init > 0.0)) error->all(FLERR, "fix otf/train: scale_init must be > 0");
      iarg += 2;
    } else if (keyword == "scale_growth") {
      value(1);
      s.scale_growth = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (!(s.scale_growth > 1.0)) error->all(FLERR, "fix otf/train: scale_growth must be > 1");
      iarg += 2;
    } else if (keyword == "scale_backoff") {
      value(1);
      s.scale_backoff = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (!(s.scale_backoff > 0.0 && s.scale_backoff < 1.0))
        error->all(FLERR, "fix otf/train: scale_backoff must be in (0, 1)");
      iarg += 2;
    } else if (keyword == "scale_interval") {
      value(1);
      s.scale_interval = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.scale_interval < 1) error->all(FLERR, "fix otf/train: scale_interval must be >= 1");
      iarg += 2;
    } else if (keyword == "save") {
      value(1);
      save_path_ = arg[iarg + 1];
      iarg += 2;
    } else if (keyword == "save_every") {
      value(1);
      save_every_ = utils::bnumeric(FLERR, arg[iarg + 1], false, lmp);
      if (save_every_ < 0) error->all(FLERR, "fix otf/train: save_every must be >= 0");
      iarg += 2;
    } else if (keyword == "drive") {
      value(1);
      const std::string who = arg[iarg + 1];
      if (who == "reference") drive_mode_ = Drive::Reference;
      else if (who == "model") drive_mode_ = Drive::Model;
      else if (who == "auto") drive_mode_ = Drive::Auto;
      else
        error->all(FLERR, "fix otf/train: unknown drive '{}' (expected reference, model or auto)",
                   arg[iarg + 1]);
      iarg += 2;
    } else if (keyword == "thresholds") {
      value(3);
      threshold_force_rmse_ = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      threshold_uncertainty_ = utils::numeric(FLERR, arg[iarg + 2], false, lmp);
      threshold_take_over_ = utils::numeric(FLERR, arg[iarg + 3], false, lmp);
      if (!(threshold_force_rmse_ > 0.0 && threshold_uncertainty_ > 0.0 &&
            threshold_take_over_ >= threshold_uncertainty_))
        error->all(FLERR, "fix otf/train: thresholds <force_rmse> <uncertainty> <take_over> "
                          "need force_rmse > 0 and 0 < uncertainty <= take_over (got {} {} {})",
                   threshold_force_rmse_, threshold_uncertainty_, threshold_take_over_);
      iarg += 4;
    } else if (keyword == "check_every") {
      value(1);
      check_every_ = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (check_every_ < 1) error->all(FLERR, "fix otf/train: check_every must be >= 1");
      iarg += 2;
    } else if (keyword == "lr_schedule") {
      value(1);
      // The kind, then its numbers (checked with the engine's rules when training is set up).
      s.lr_schedule = arg[iarg + 1];
      s.lr_schedule_parameters.clear();
      iarg += 2;
      while (iarg < narg && utils::is_double(arg[iarg]))
        s.lr_schedule_parameters.push_back(utils::numeric(FLERR, arg[iarg++], false, lmp));
    } else if (keyword == "accumulate") {
      value(1);
      s.accumulate = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.accumulate < 1) error->all(FLERR, "fix otf/train: accumulate must be >= 1 batch");
      iarg += 2;
    } else if (keyword == "ema") {
      value(1);
      s.ema_decay = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (!(s.ema_decay >= 0.0 && s.ema_decay < 1.0))
        error->all(FLERR, "fix otf/train: ema decay must be in [0, 1) (0: off), got {}",
                   s.ema_decay);
      iarg += 2;
    } else if (keyword == "stats_frames") {
      value(1);
      s.stats_frames = utils::inumeric(FLERR, arg[iarg + 1], false, lmp);
      if (s.stats_frames < 0) error->all(FLERR, "fix otf/train: stats_frames must be >= 0");
      iarg += 2;
    } else {
      error->all(FLERR, "fix otf/train: unknown keyword '{}' (expected one of: {})", keyword,
                 kKeywords);
    }
  }
  if (save_every_ > 0 && save_path_.empty())
    error->all(FLERR, "fix otf/train: save_every needs a file: save <path>");
  if (drive_mode_ == Drive::Auto && threshold_force_rmse_ <= 0.0)
    error->all(FLERR, "fix otf/train: drive auto needs thresholds <force_rmse> <uncertainty> "
                      "<take_over> (force units), e.g. thresholds 0.1 0.15 0.5");
  if (drive_mode_ != Drive::Auto && (threshold_force_rmse_ > 0.0 || check_every_ > 0))
    error->all(FLERR, "fix otf/train: thresholds and check_every apply to drive auto only");
  if (check_every_ == 0) check_every_ = label_every_;
  // Auto starts with the reference driving, until the model is good enough.
  drive_reference_ = drive_mode_ != Drive::Model;
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::create_reference()
{
  int sflag = 0;
  // The plain style, also under -sf kk: the reference runs on the host arrays LAMMPS syncs for
  // this fix, with its own host neighbour list.
  reference_ = force->new_pair(reference_style_, 0, sflag);
  if (!reference_)
    error->all(FLERR, "fix otf/train: unknown reference pair style '{}'", reference_style_);
  std::vector<char *> words;
  for (auto &word : reference_settings_) words.push_back(&word[0]);
  reference_->settings(static_cast<int>(words.size()), words.data());
  for (auto &coeff : reference_coeffs_) {
    words.clear();
    for (auto &word : coeff) words.push_back(&word[0]);
    reference_->coeff(static_cast<int>(words.size()), words.data());
  }
}

/* ---------------------------------------------------------------------- */

template <typename Body> void FixOTFTrain::on_all_ranks_or_error(const std::string &what, Body &&body)
{
  const std::string failure = otf::first_failure_on_any_rank(world, std::forward<Body>(body));
  if (!failure.empty()) error->all(FLERR, "fix otf/train: {}: {}", what, failure);
}

/* ---------------------------------------------------------------------- */

int FixOTFTrain::setmask()
{
  return POST_FORCE;
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::init()
{
  model_pair_ = dynamic_cast<PairOTF *>(force->pair_match("^otf", 0));
  if (!model_pair_)
    error->all(FLERR, "fix otf/train needs pair_style otf (alone or under hybrid/overlay): it "
                      "trains the model that pair style evaluates");
  const double cutoff = model_pair_->model_session().cutoff();
  type_species_ = model_pair_->type_species();
  if (static_cast<int>(type_species_.size()) != atom->ntypes + 1)
    error->all(FLERR, "fix otf/train: pair_coeff * * <element per type> must follow pair_style otf");

  // The reference: its own neighbour list, at its own cutoff.
  const int first_request = neighbor->nrequest;
  reference_->init();
  const double reference_cutoff = reference_->cutforce;
  for (int i = first_request; i < neighbor->nrequest; i++) {
    neighbor->requests[i]->cut = 1;
    neighbor->requests[i]->cutoff = reference_cutoff + neighbor->skin;
  }

  // The frame: a full list, with ghost neighbours too when ghost atoms are centres.
  fold_images_ = comm->nprocs == 1 && atom->tag_enable;
  const int irequest = neighbor->request(this, instance_me);
  neighbor->requests[irequest]->pair = 0;
  neighbor->requests[irequest]->fix = 1;
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
  neighbor->requests[irequest]->ghost = fold_images_ ? 0 : 1;

  // The reference's own list needs ghosts out to its cutoff (LAMMPS sizes the ghost shell by
  // the pair style's cutoff only), and ghost centres within the cutoff of an owned atom need
  // every neighbour within the cutoff.
  const double needed =
      (fold_images_ ? reference_cutoff : std::max(2.0 * cutoff, reference_cutoff)) + neighbor->skin;
  // LAMMPS' own ghost shell: the user's comm cutoff or the pair style's cutoff + skin.
  const double shell = std::max(comm->cutghostuser, force->pair->cutforce + neighbor->skin);
  if (shell < needed) {
    if (comm->me == 0 && !ghost_cutoff_warned_)
      error->warning(FLERR, "fix otf/train: ghost cutoff raised to {} ({} + skin, as comm_modify "
                            "cutoff does)", needed,
                     fold_images_ ? "reference cutoff" : "max(2 x model cutoff, reference cutoff)");
    ghost_cutoff_warned_ = true;
    comm->cutghostuser = needed;
  }

  if (!session_) {
#ifdef OTF_WITH_KOKKOS
    if (lmp->kokkos) {
      // The model is where pair_style otf evaluates it: Kokkos' device for otf/kk, else the host.
      const bool on_host = !model_pair_->kokkosable ||
          utils::strmatch(force->pair_style, "/kk/host");
      settings_->kokkos_execution_space = kokkos_execution_space_name(on_host);
      settings_->kokkos_device_id = kokkos_device_id(lmp, on_host);
    }
#endif
    on_all_ranks_or_error("cannot set up training", [&] {
      session_ = std::make_unique<otf::TrainingSession>(
          model_pair_->model_session().potential(), *settings_, world);
    });
    if (comm->me == 0)
      utils::logmesg(lmp,
                     "fix otf/train: reference pair_style {}, model cutoff {}, precision {}, "
                     "label every {} steps, {} optimizer step(s) of {} frame(s) per frame, "
                     "buffer {} frames, device {}\n",
                     reference_style_, cutoff, settings_->precision, label_every_,
                     settings_->steps_per_frame, settings_->batch_frames,
                     settings_->buffer_frames, session_->device_name());
  }
  if (restart_pending_) apply_restart();
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::init_list(int /*id*/, NeighList *ptr)
{
  list_ = ptr;
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::setup(int vflag)
{
  if (restart_swap_back_) {
    restart_swap_back_ = false;
    session_->swap_snapshot_weights();
    session_->clear_snapshot();
  }
  post_force(vflag);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::post_force(int /*vflag*/)
{
  const bigint step = update->ntimestep;
  const bool model_drives = !drive_reference_;
  // setup() of a later run (or after read_restart) evaluates the forces of a step again.
  const bool repeated_step = step == last_counted_step_;
  if (!repeated_step) {
    last_counted_step_ = step;
    if (model_drives) model_driven_steps_++;
  }
  // Fixed modes and auto's reference phase label on schedule; auto's model phase checks the
  // uncertainty on schedule and labels only what is uncertain.
  const bool checking = drive_mode_ == Drive::Auto && model_drives;
  const bool label = !checking && step % label_every_ == 0 && step != last_labelled_step_;
  const bool check = checking && step % check_every_ == 0 && step != last_checked_step_;

  if (drive_reference_ && !label) {
    double energy = 0.0, virial[6];
    label_current_configuration(energy, virial);
    // The same call as on the first evaluation of this step: counted once.
    if (repeated_step) reference_calls_--;
  }
  if (label) {
    last_labelled_step_ = step;
    otf::FramePart frame;
    describe_frame(frame);
    label_and_train(frame);
    measure_uncertainty(frame);
    const otf::TrainingReport &report = session_->report();
    if (drive_mode_ == Drive::Auto && report.validated &&
        report.force_rmse < threshold_force_rmse_ && max_uncertainty_ < threshold_uncertainty_) {
      drive_reference_ = false;
      if (comm->me == 0)
        utils::logmesg(lmp, "fix otf/train: step {}: the model drives (validation force RMSE {:.4g} "
                            "< {:.4g}, force uncertainty {:.4g} < {:.4g})\n",
                       step, report.force_rmse, threshold_force_rmse_, max_uncertainty_,
                       threshold_uncertainty_);
    }
  }
  if (check) {
    last_checked_step_ = step;
    otf::FramePart frame;
    describe_frame(frame);
    measure_uncertainty(frame);
    if (max_uncertainty_ > threshold_uncertainty_) {
      last_labelled_step_ = step;
      model_phase_reference_calls_++;
      // Set before labelling: the reference's forces then stay for this step.
      drive_reference_ = max_uncertainty_ > threshold_take_over_;
      if (drive_reference_ && comm->me == 0)
        utils::logmesg(lmp, "fix otf/train: step {}: force uncertainty {:.4g} > {:.4g}: the "
                            "reference drives until the model is good enough again\n",
                       step, max_uncertainty_, threshold_take_over_);
      label_and_train(frame);
    }
  }
  if (save_every_ > 0 && step % save_every_ == 0 && step != last_saved_step_)
    save_model("save_every");
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::post_run()
{
  if (!save_path_.empty() && session_ && last_saved_step_ != update->ntimestep)
    save_model("end of run");
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::grow_work_arrays()
{
  if (atom->nmax <= nmax_) return;
  nmax_ = atom->nmax;
  memory->destroy(saved_forces_);
  memory->destroy(atom_species_);
  memory->create(saved_forces_, nmax_, 3, "otf/train:saved_forces");
  memory->create(atom_species_, nmax_, "otf/train:atom_species");
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::label_current_configuration(double &energy, double virial[6])
{
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;
  double **f = atom->f;
  grow_work_arrays();
  std::memcpy(saved_forces_[0], f[0], sizeof(double) * 3 * nall);
  std::memset(f[0], 0, sizeof(double) * 3 * nall);

  // As Integrate::ev_set would: global energy and virial, by f.r when the style allows it.
  const int vflag = reference_->no_virial_fdotr_compute ? VIRIAL_PAIR : VIRIAL_FDOTR;
  reference_->compute(ENERGY_GLOBAL, vflag);
  if (force->newton_pair) comm->reverse_comm();
  reference_calls_++;

  owned_forces_.assign(f[0], f[0] + 3 * nlocal);
  // The reference drives: its forces stay (the owned ones count after reverse communication).
  if (!drive_reference_) std::memcpy(f[0], saved_forces_[0], sizeof(double) * 3 * nall);

  double local[7] = {reference_->eng_vdwl + reference_->eng_coul};
  for (int k = 0; k < 6; k++) local[1 + k] = reference_->virial[k];
  double total[7];
  MPI_Allreduce(local, total, 7, MPI_DOUBLE, MPI_SUM, world);
  energy = total[0];
  for (int k = 0; k < 6; k++) virial[k] = total[1 + k];
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::describe_frame(otf::FramePart &frame)
{
  grow_work_arrays();
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;
  const int *type = atom->type;
  for (int i = 0; i < nall; i++) atom_species_[i] = type_species_[type[i]];

  // Folding: every ghost is an image of an owned atom (one rank), found by its tag.
  if (fold_images_) {
    std::unordered_map<tagint, int> owned_by_tag;
    owned_by_tag.reserve(nlocal);
    const tagint *tag = atom->tag;
    for (int i = 0; i < nlocal; i++) owned_by_tag[tag[i]] = i;
    force_owner_.resize(nall);
    for (int i = 0; i < nall; i++) {
      const auto owner = owned_by_tag.find(tag[i]);
      if (owner == owned_by_tag.end())
        error->one(FLERR, "fix otf/train: ghost atom {} (ID {}) is not an image of an owned atom",
                   i, tag[i]);
      force_owner_[i] = owner->second;
    }
  }

  // Centres: owned atoms with an element, then (without folding) ghost atoms within the model
  // cutoff of one.
  const double cutoff_sq = std::pow(model_pair_->model_session().cutoff(), 2);
  double **x = atom->x;
  std::vector<unsigned char> near_owned(nall, 0);
  for (int ii = 0; ii < list_->inum && !fold_images_; ii++) {
    const int i = list_->ilist[ii];
    if (i >= nlocal || atom_species_[i] < 0) continue;
    const int *jlist = list_->firstneigh[i];
    for (int jj = 0; jj < list_->numneigh[i]; jj++) {
      const int j = jlist[jj] & NEIGHMASK;
      if (j < nlocal) continue;
      const double dx = x[j][0] - x[i][0], dy = x[j][1] - x[i][1], dz = x[j][2] - x[i][2];
      if (dx * dx + dy * dy + dz * dz < cutoff_sq) near_owned[j] = 1;
    }
  }
  // ilist of a ghost list: owned atoms, then ghosts (gnum of them); index by atom.
  std::vector<int> entry_of_atom(nall, -1);
  const int entries = list_->inum + list_->gnum;
  for (int ii = 0; ii < entries; ii++) entry_of_atom[list_->ilist[ii]] = ii;
  centers_.clear();
  center_counts_.clear();
  center_neighbor_counts_.clear();
  center_neighbors_.clear();
  for (int i = 0; i < nall; i++) {
    if (atom_species_[i] < 0 || (i >= nlocal && !near_owned[i])) continue;
    const int ii = entry_of_atom[i];
    if (ii < 0) error->one(FLERR, "fix otf/train: atom {} has no neighbour list entry", i);
    const int atom_index = list_->ilist[ii];
    centers_.push_back(i);
    center_counts_.push_back(i < nlocal ? 1 : 0);
    center_neighbor_counts_.push_back(list_->numneigh[atom_index]);
    center_neighbors_.push_back(list_->firstneigh[atom_index]);
  }

  frame = otf::FramePart{};
  frame.system.num_atoms = nall;
  frame.system.num_local = nlocal;
  frame.system.positions = x[0];
  frame.system.species = atom_species_;
  frame.system.num_centers = static_cast<int>(centers_.size());
  frame.system.centers = centers_.data();
  frame.system.neighbor_counts = center_neighbor_counts_.data();
  frame.system.neighbors = center_neighbors_.data();
  frame.system.neighbor_index_mask = NEIGHMASK;
  frame.center_energy_counts = center_counts_.data();
  frame.force_owner = fold_images_ ? force_owner_.data() : nullptr;
  frame.volume = domain->xprd * domain->yprd * domain->zprd;
  frame.atoms_in_frame = static_cast<int64_t>(atom->natoms);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::label_and_train(otf::FramePart &frame)
{
  double energy = 0.0, virial[6];
  label_current_configuration(energy, virial);
  frame.owned_forces = owned_forces_.data();
  frame.energy = energy;
  for (int k = 0; k < 6; k++) frame.virial[k] = virial[k];

  on_all_ranks_or_error(fmt::format("training on step {}", update->ntimestep), [&] {
    // The weights this step's forces came from, for a restart file written on this step.
    session_->snapshot_weights();
    session_->add_frame(frame);
    session_->train();
    session_->validate();
  });
  check_replicas();
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::measure_uncertainty(const otf::FramePart &frame)
{
  on_all_ranks_or_error("measuring the force uncertainty", [&] {
    max_uncertainty_ = session_->force_uncertainty(frame, force_uncertainty_);
  });
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::check_replicas()
{
  const unsigned long long hash = session_->weights_hash();
  unsigned long long low = 0, high = 0;
  MPI_Allreduce(&hash, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, world);
  MPI_Allreduce(&hash, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, world);
  replicas_differ_ = low != high ? 1 : 0;
  if (replicas_differ_ && comm->me == 0)
    error->warning(FLERR, "fix otf/train: the model replicas differ across ranks on step {}",
                   update->ntimestep);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::save_model(const char *why)
{
  std::string message;
  if (comm->me == 0) {
    try {
      session_->save(save_path_);
    } catch (std::exception &e) {
      message = e.what();
      if (message.empty()) message = "unknown error";
    }
  }
  otf::broadcast_bytes(message, 0, world);
  if (!message.empty()) error->all(FLERR, "fix otf/train: cannot save the model: {}", message);
  last_saved_step_ = update->ntimestep;
  if (comm->me == 0)
    utils::logmesg(lmp, "fix otf/train: step {}: model saved to {} ({}, {} optimizer steps)\n",
                   update->ntimestep, save_path_, why, session_->report().optimizer_steps);
}

/* ---------------------------------------------------------------------- */

double FixOTFTrain::compute_vector(int n)
{
  const otf::TrainingReport report = session_ ? session_->report() : otf::TrainingReport{};
  switch (n) {
    case 0: return report.last_loss;
    case 1: return report.energy_rmse_per_atom;
    case 2: return report.force_rmse;
    case 3: return report.stress_rmse;
    case 4: return report.loss_scale;
    case 5: return static_cast<double>(report.skipped_steps);
    case 6: return static_cast<double>(report.optimizer_steps);
    case 7: return static_cast<double>(report.buffer_frames);
    case 8: return static_cast<double>(reference_calls_);
    case 9: return max_uncertainty_;
    case 10: return drive_reference_ ? 0.0 : 1.0;
    case 11: return static_cast<double>(replicas_differ_);
    case 12: return static_cast<double>(model_driven_steps_);
    case 13: return static_cast<double>(model_phase_reference_calls_);
    case 14: return session_ ? session_->learning_rate() : settings_->learning_rate;
    default: return 0.0;
  }
}

/* ---------------------------------------------------------------------- */

double FixOTFTrain::memory_usage()
{
  return static_cast<double>(nmax_) * (3 * sizeof(double) + sizeof(int)) +
      static_cast<double>(atom->nmax) * sizeof(double);
}

/* ----------------------------------------------------------------------
   The per-atom force uncertainty migrates with its atoms.
------------------------------------------------------------------------- */

void FixOTFTrain::grow_arrays(int nmax)
{
  memory->grow(force_uncertainty_, nmax, "otf/train:force_uncertainty");
  vector_atom = force_uncertainty_;
}

void FixOTFTrain::copy_arrays(int i, int j, int /*delflag*/)
{
  force_uncertainty_[j] = force_uncertainty_[i];
}

int FixOTFTrain::pack_exchange(int i, double *buf)
{
  buf[0] = force_uncertainty_[i];
  return 1;
}

int FixOTFTrain::unpack_exchange(int nlocal, double *buf)
{
  force_uncertainty_[nlocal] = buf[0];
  return 1;
}

/* ----------------------------------------------------------------------
   Restart: every rank is called (Modify::write_restart); rank 0 writes.
------------------------------------------------------------------------- */

void FixOTFTrain::write_restart(FILE *fp)
{
  std::string session_bytes, buffer_bytes;
  const int has_session = session_ ? 1 : 0;
  if (has_session)
    on_all_ranks_or_error("cannot save the training state for the restart file", [&] {
      session_bytes = session_->save_state(last_labelled_step_ == update->ntimestep);
      buffer_bytes = session_->save_buffer_state();
    });

  // Every rank's replay buffer part, gathered to rank 0.
  const int nprocs = comm->nprocs;
  if (buffer_bytes.size() > static_cast<size_t>(INT_MAX))
    error->one(FLERR, "fix otf/train: the replay buffer is too large for a restart file");
  int size = static_cast<int>(buffer_bytes.size());
  std::vector<int> sizes(nprocs, 0), offsets(nprocs, 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, world);
  long long total = 0;
  for (int p = 0; p < nprocs; p++) {
    offsets[p] = static_cast<int>(total);
    total += sizes[p];
  }
  if (comm->me == 0 && total > INT_MAX)
    error->one(FLERR, "fix otf/train: the replay buffers are too large for a restart file");
  std::string all_buffers(comm->me == 0 ? static_cast<size_t>(total) : 0, '\0');
  MPI_Gatherv(buffer_bytes.data(), size, MPI_CHAR, &all_buffers[0], sizes.data(),
              offsets.data(), MPI_CHAR, 0, world);
  if (comm->me != 0) return;

  std::string payload;
  append_value<int64_t>(payload, reference_calls_);
  append_value<int64_t>(payload, last_labelled_step_);
  append_value<int64_t>(payload, last_saved_step_);
  append_value<double>(payload, max_uncertainty_);
  append_value<int32_t>(payload, replicas_differ_);
  append_value<int32_t>(payload, has_session);
  append_string(payload, session_bytes);
  append_value<int32_t>(payload, drive_reference_ ? 1 : 0);
  append_value<int64_t>(payload, last_checked_step_);
  append_value<int64_t>(payload, last_counted_step_);
  append_value<int64_t>(payload, model_driven_steps_);
  append_value<int64_t>(payload, model_phase_reference_calls_);
  append_value<int32_t>(payload, nprocs);
  for (int p = 0; p < nprocs; p++)
    append_string(payload, all_buffers.substr(offsets[p], sizes[p]));

  std::string blob(kRestartTag, sizeof(kRestartTag));
  append_value<uint32_t>(blob, kRestartVersion);
  append_value<uint64_t>(blob, payload.size());
  blob += payload;
  if (blob.size() > static_cast<size_t>(INT_MAX))
    error->one(FLERR, "fix otf/train: the training state ({} bytes) is too large for a restart "
                      "file", blob.size());
  const int n = static_cast<int>(blob.size());
  fwrite(&n, sizeof(int), 1, fp);
  fwrite(blob.data(), sizeof(char), blob.size(), fp);
}

/* ----------------------------------------------------------------------
   Called on every rank with the same bytes, when the fix is defined again.
------------------------------------------------------------------------- */

void FixOTFTrain::restart(char *buf)
{
  if (std::memcmp(buf, kRestartTag, sizeof(kRestartTag)) != 0)
    error->all(FLERR, "fix otf/train: the restart file's data for fix {} is not an otf/train "
                      "training state", id);
  uint32_t version = 0;
  uint64_t length = 0;
  std::memcpy(&version, buf + sizeof(kRestartTag), sizeof(version));
  std::memcpy(&length, buf + sizeof(kRestartTag) + sizeof(version), sizeof(length));
  if (version > kRestartVersion)
    error->all(FLERR, "fix otf/train: the restart file's training state has format {}, newer "
                      "than this plugin reads ({}); update OTF-Torch", version, kRestartVersion);
  const char *data = buf + sizeof(kRestartTag) + sizeof(version) + sizeof(length);
  const char *end = data + length;
  auto take = [&](void *out, size_t size) {
    if (size > static_cast<size_t>(end - data))
      error->all(FLERR, "fix otf/train: the restart file's training state is truncated");
    std::memcpy(out, data, size);
    data += size;
  };
  auto take_string = [&](std::string *out) {
    uint64_t size = 0;
    take(&size, sizeof(size));
    if (size > static_cast<uint64_t>(end - data))
      error->all(FLERR, "fix otf/train: the restart file's training state is truncated");
    if (out) out->assign(data, size);
    data += size;
  };
  int64_t reference_calls = 0, last_labelled = 0, last_saved = 0;
  int32_t replicas_differ = 0, has_session = 0, ranks = 0;
  take(&reference_calls, sizeof(reference_calls));
  take(&last_labelled, sizeof(last_labelled));
  take(&last_saved, sizeof(last_saved));
  take(&max_uncertainty_, sizeof(max_uncertainty_));
  take(&replicas_differ, sizeof(replicas_differ));
  take(&has_session, sizeof(has_session));
  take_string(&restart_session_);
  if (version >= 2) {
    int32_t drive_reference = 0;
    int64_t last_checked = 0, last_counted = 0, model_steps = 0, model_calls = 0;
    take(&drive_reference, sizeof(drive_reference));
    take(&last_checked, sizeof(last_checked));
    take(&last_counted, sizeof(last_counted));
    take(&model_steps, sizeof(model_steps));
    take(&model_calls, sizeof(model_calls));
    // Only auto switches who drives; a fixed mode given again keeps its own choice.
    if (drive_mode_ == Drive::Auto) drive_reference_ = drive_reference != 0;
    last_checked_step_ = last_checked;
    last_counted_step_ = last_counted;
    model_driven_steps_ = model_steps;
    model_phase_reference_calls_ = model_calls;
  }
  take(&ranks, sizeof(ranks));
  restart_buffer_.clear();
  for (int p = 0; p < ranks; p++) take_string(p == comm->me && ranks == comm->nprocs ?
                                              &restart_buffer_ : nullptr);
  reference_calls_ = reference_calls;
  last_labelled_step_ = last_labelled;
  last_saved_step_ = last_saved;
  replicas_differ_ = replicas_differ;
  restart_ranks_ = ranks;
  restart_pending_ = has_session != 0;
  if (session_ && restart_pending_) apply_restart();
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::apply_restart()
{
  restart_pending_ = false;
  on_all_ranks_or_error("cannot restore the training state from the restart file",
                        [&] {
                          session_->load_state(restart_session_);
                          // Until setup() has evaluated this step's forces (see the header).
                          restart_swap_back_ = session_->swap_snapshot_weights();
                          if (!restart_swap_back_) session_->clear_snapshot();
                        });
  if (restart_ranks_ == comm->nprocs) {
    on_all_ranks_or_error("cannot restore the replay buffer from the restart file",
                          [&] { session_->load_buffer_state(restart_buffer_); });
  } else if (comm->me == 0) {
    error->warning(FLERR, "fix otf/train: the restart file was written by {} MPI ranks, this run "
                          "has {}: the replay buffer (each rank's part of the frames) is dropped "
                          "and starts empty; the model and training state are restored",
                   restart_ranks_, comm->nprocs);
  }
  if (comm->me == 0)
    utils::logmesg(lmp, "fix otf/train: training state restored from the restart file ({} "
                        "optimizer steps, {} frames in the replay buffer)\n",
                   session_->report().optimizer_steps, session_->report().buffer_frames);
  restart_session_.clear();
  restart_session_.shrink_to_fit();
  restart_buffer_.clear();
  restart_buffer_.shrink_to_fit();
}

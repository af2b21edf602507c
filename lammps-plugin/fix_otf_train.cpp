/* ----------------------------------------------------------------------
   OTF-Torch: fix otf/train (doc/fix_otf_train.md).

   The fix moves data: it gives the training layer (training/on_the_fly_
   trainer.h) the rank's part of the current configuration through the one
   MD-to-model adaptor (potentials/md_system_adaptor.h), and a LAMMPS pair
   style as the reference (pair_style_reference.h). The trainer decides
   what to label, trains and saves. A rank's part of a frame: its owned
   atoms as centres and the ghost atoms around them, each ghost named by
   the rank and centre index of the atom it is an image of (a forward
   communication of those two numbers), so that the training layer hands
   the ghosts' forces to their owners (potentials/potential_training.h).
------------------------------------------------------------------------- */

#include "fix_otf_train.h"

#include "external_code_reference.h"
#include "ipi_reference.h"
#include "lammps_md_arrays.h"
#include "model_session.h"
#include "on_the_fly_trainer.h"
#include "keyword_values.h"
#include "otf_lammps_compat.h"
#include "pair_otf.h"
#include "pair_style_reference.h"
#include "restart_archive.h"
#ifdef OTF_WITH_KOKKOS
#include "pair_otf_kokkos_factory.h"
#endif

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "modify.h"
#include "neigh_list.h"
#include "neighbor.h"
#include "timer.h"
#include "update.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

using namespace LAMMPS_NS;
using namespace FixConst;

namespace {

const char *const kSyntax =
    "fix ID all otf/train reference \"<pair_style args>\" coeff \"<pair_coeff args>\" "
    "[coeff \"...\"]... [keyword value ...], or fix ID all otf/train reference ipi unix <name> | "
    "inet [<host>:]<port> [keyword value ...]";
const char *const kKeywords =
    "precision, every, steps_per_frame, batch, lr, optimizer, weights, buffer, validation, "
    "seed, clip, scale_init, scale_growth, scale_backoff, scale_interval, save, save_every, "
    "stats_frames, drive, accuracy, thresholds, check_every, min_labels, take_over, "
    "label_steps, calibration_window, lr_schedule, accumulate, ema, max_skips, outlier_factor, "
    "journal, "
    "warm_start, max_calls, learning_log, client, client_log, not_converged, connect_timeout, "
    "timeout, retries";
constexpr int kVectorSize = 19;

}    // namespace

/* ----------------------------------------------------------------------
   What the trainer reads of the current configuration, from LAMMPS' arrays.
------------------------------------------------------------------------- */

class FixOTFTrain::FrameSource : public otf::MdFrameSource {
 public:
  explicit FrameSource(FixOTFTrain &fix) : fix_(fix) {}

  otf::FramePart describe_frame() override
  {
    Atom *atom = fix_.atom;
    const otf::MdAtoms atoms = md_atoms(atom);
    const otf::MdNeighborList neighbors = md_neighbor_list(fix_.list_);
    otf::FramePart frame;
    frame.system = fix_.adaptor_.owned_centres(atoms, neighbors);
    fix_.share_owners();
    frame.owner_rank = fix_.owner_rank_.data();
    frame.owner_centre = fix_.owner_centre_.data();
    Domain *domain = fix_.domain;
    frame.volume = domain->xprd * domain->yprd * domain->zprd;
    frame.atoms_in_frame = static_cast<int64_t>(atom->natoms);
    return frame;
  }

  otf::ReferenceConfiguration reference_configuration() override
  {
    Atom *atom = fix_.atom;
    Domain *domain = fix_.domain;
    otf::ReferenceConfiguration configuration;
    configuration.step = fix_.update->ntimestep;
    configuration.num_local = atom->nlocal;
    configuration.positions = atom->x[0];
    configuration.types = atom->type;
    fix_.ids_.assign(atom->tag, atom->tag + atom->nlocal);
    configuration.ids = fix_.ids_.data();
    configuration.atoms_in_frame = static_cast<int64_t>(atom->natoms);
    // LAMMPS' restricted triclinic cell: a = (xprd, 0, 0), b = (xy, yprd, 0), c = (xz, yz, zprd).
    configuration.cell = {domain->xprd, 0.0, 0.0, domain->xy, domain->yprd, 0.0,
                          domain->xz,   domain->yz, domain->zprd};
    configuration.origin = {domain->boxlo[0], domain->boxlo[1], domain->boxlo[2]};
    return configuration;
  }

  double *force_uncertainty_per_atom() override { return fix_.force_uncertainty_; }

 private:
  FixOTFTrain &fix_;
};

/* ---------------------------------------------------------------------- */

FixOTFTrain::FixOTFTrain(LAMMPS *lmp, int narg, char **arg) :
    Fix(lmp, narg, arg), settings_(std::make_unique<otf::TrainerSettings>()),
    frame_source_(std::make_unique<FrameSource>(*this))
{
  vector_flag = 1;
  comm_forward = 2;    // owner rank and centre index of each atom (share_owners)
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

  if (strcmp(arg[4], "ipi") == 0) {
    // An ab initio code (or any i-PI client) behind a socket: training/ipi_reference.h.
    ipi_settings_ = std::make_unique<otf::IpiReferenceSettings>();
    parse_ipi_address(arg[5], arg[6]);
    parse_keywords(narg, arg, 7);
    create_ipi_reference();
  } else {
    create_pair_style_reference(narg, arg);
  }

  FixOTFTrain::grow_arrays(atom->nmax);
  atom->add_callback(Atom::GROW);
  for (int i = 0; i < atom->nmax; i++) force_uncertainty_[i] = 0.0;
}

/* ----------------------------------------------------------------------
   reference "<pair_style args>" coeff "<pair_coeff args>" ... [keywords]
------------------------------------------------------------------------- */

void FixOTFTrain::create_pair_style_reference(int narg, char **arg)
{
  const auto style_words = utils::split_words(arg[4]);
  if (style_words.empty())
    error->all(FLERR, "fix otf/train: the reference needs a pair style, e.g. reference "
                      "\"lj/cut 8.5\"");
  // The model cannot be its own reference, also not as a part of a hybrid reference.
  for (const auto &word : style_words)
    if (utils::strmatch(word, "^otf"))
      error->all(FLERR, "fix otf/train: the reference may not use pair style '{}' (the model); "
                        "use another style: lj/cut, sw, tersoff, eam/alloy, snap, hybrid/overlay "
                        "of those, ...", word);

  int iarg = 5;
  std::vector<std::vector<std::string>> coeff_lines;
  while (iarg < narg && strcmp(arg[iarg], "coeff") == 0) {
    if (iarg + 1 >= narg)
      error->all(FLERR, "fix otf/train: 'coeff' needs a quoted pair_coeff line, e.g. "
                        "coeff \"* * 0.0104 3.405\"");
    coeff_lines.push_back(utils::split_words(arg[iarg + 1]));
    iarg += 2;
  }
  if (coeff_lines.empty())
    error->all(FLERR, "fix otf/train: at least one coeff \"<pair_coeff args>\" must follow "
                      "the reference ({})", kSyntax);
  parse_keywords(narg, arg, iarg);
  auto pair_reference =
      std::make_unique<PairStyleReference>(lmp, style_words, std::move(coeff_lines));
  pair_reference_ = pair_reference.get();
  reference_ = std::move(pair_reference);
}

/* ---------------------------------------------------------------------- */

FixOTFTrain::~FixOTFTrain()
{
  atom->delete_callback(id, Atom::GROW);
  memory->destroy(force_uncertainty_);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::parse_keywords(int narg, char **arg, int iarg)
{
  otf::TrainingSessionSettings &s = settings_->session;
  otf::PolicySettings &policy = settings_->policy;
  bool drive_given = false, targets_given = false;
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
      policy.label_every = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, INT_MAX);
      iarg += 2;
    } else if (keyword == "steps_per_frame") {
      value(1);
      s.steps_per_frame = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, 100000);
      iarg += 2;
    } else if (keyword == "batch") {
      value(1);
      s.batch_frames = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, 100000);
      iarg += 2;
    } else if (keyword == "lr") {
      value(1);
      s.learning_rate = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0.0, 1e30);
      iarg += 2;
    } else if (keyword == "optimizer") {
      value(1);
      // Checked by the engine's parser (any case) when the training session is set up.
      s.optimizer = arg[iarg + 1];
      iarg += 2;
    } else if (keyword == "weights") {
      value(3);
      s.energy_weight = otf_keywords::real_value(lmp, "fix otf/train", "weights E", arg[iarg + 1], 0.0, 1e30);
      s.force_weight = otf_keywords::real_value(lmp, "fix otf/train", "weights F", arg[iarg + 2], 0.0, 1e30);
      s.stress_weight = otf_keywords::real_value(lmp, "fix otf/train", "weights S", arg[iarg + 3], 0.0, 1e30);
      if (s.energy_weight < 0.0 || s.force_weight < 0.0 || s.stress_weight < 0.0 ||
          s.energy_weight + s.force_weight + s.stress_weight <= 0.0)
        error->all(FLERR, "fix otf/train: weights E F S must be >= 0 and not all 0");
      iarg += 4;
    } else if (keyword == "buffer") {
      value(1);
      s.buffer_frames = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, 100000000);
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
      s.seed = static_cast<uint64_t>(otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, INT_MAX));
      iarg += 2;
    } else if (keyword == "clip") {
      value(1);
      s.clip_max_norm = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0.0, 1e30);
      iarg += 2;
    } else if (keyword == "scale_init") {
      value(1);
      s.scale_init = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0.0, 1e30, true);
      iarg += 2;
    } else if (keyword == "scale_growth") {
      value(1);
      s.scale_growth = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1.0, 1e6, true);
      iarg += 2;
    } else if (keyword == "scale_backoff") {
      value(1);
      s.scale_backoff = utils::numeric(FLERR, arg[iarg + 1], false, lmp);
      if (!(s.scale_backoff > 0.0 && s.scale_backoff < 1.0))
        error->all(FLERR, "fix otf/train: scale_backoff must be in (0, 1)");
      iarg += 2;
    } else if (keyword == "scale_interval") {
      value(1);
      s.scale_interval = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, INT_MAX);
      iarg += 2;
    } else if (keyword == "save") {
      value(1);
      settings_->save_path = otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]);
      iarg += 2;
    } else if (keyword == "save_every") {
      value(1);
      settings_->save_every = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, 1000000000000000000LL);
      iarg += 2;
    } else if (keyword == "drive") {
      value(1);
      std::string message;
      try {
        policy.mode = otf::parse_drive_mode(arg[iarg + 1]);
        drive_given = true;
      } catch (std::exception &e) {
        message = e.what();
      }
      if (!message.empty()) error->all(FLERR, "fix otf/train: {}", message);
      iarg += 2;
    } else if (keyword == "thresholds") {
      value(3);
      targets_given = true;
      policy.hand_over_force_rmse = otf_keywords::real_value(lmp, "fix otf/train", "thresholds <force_rmse>", arg[iarg + 1], 0.0, 1e30, true);
      policy.label_uncertainty = otf_keywords::real_value(lmp, "fix otf/train", "thresholds <uncertainty>", arg[iarg + 2], 0.0, 1e30, true);
      policy.take_over_uncertainty = otf_keywords::real_value(lmp, "fix otf/train", "thresholds <take_over>", arg[iarg + 3], 0.0, 1e30, true);
      if (!(policy.hand_over_force_rmse > 0.0 && policy.label_uncertainty > 0.0 &&
            policy.take_over_uncertainty >= policy.label_uncertainty))
        error->all(FLERR, "fix otf/train: thresholds <force_rmse> <uncertainty> <take_over> "
                          "need force_rmse > 0 and 0 < uncertainty <= take_over (got {} {} {})",
                   policy.hand_over_force_rmse, policy.label_uncertainty,
                   policy.take_over_uncertainty);
      iarg += 4;
    } else if (keyword == "accuracy") {
      value(2);
      targets_given = true;
      policy.target_force_error = otf_keywords::real_value(lmp, "fix otf/train", "accuracy <force>", arg[iarg + 1], 0.0, 1e30, true);
      policy.target_energy_error = otf_keywords::real_value(lmp, "fix otf/train", "accuracy <energy>", arg[iarg + 2], 0.0, 1e30, true);
      iarg += 3;
    } else if (keyword == "min_labels") {
      value(1);
      policy.min_labels = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, 1000000);
      iarg += 2;
    } else if (keyword == "take_over") {
      value(1);
      policy.take_over_factor = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 2.0, 1e6, true);
      iarg += 2;
    } else if (keyword == "label_steps") {
      value(1);
      settings_->label_steps = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, 1000000);
      iarg += 2;
    } else if (keyword == "calibration_window") {
      value(1);
      settings_->calibration_window = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, 1000000);
      iarg += 2;
    } else if (keyword == "check_every") {
      value(1);
      policy.check_every = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, INT_MAX);
      iarg += 2;
    } else if (keyword == "lr_schedule") {
      value(1);
      // The kind, then its numbers (checked with the engine's rules when training is set up).
      s.lr_schedule = arg[iarg + 1];
      s.lr_schedule_parameters.clear();
      iarg += 2;
      while (iarg < narg && utils::is_double(arg[iarg]))
        s.lr_schedule_parameters.push_back(otf_keywords::real_value(
            lmp, "fix otf/train", "lr_schedule", arg[iarg++], -1e30, 1e30));
    } else if (keyword == "accumulate") {
      value(1);
      s.accumulate = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 1, 100000);
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
      s.stats_frames = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, 100000);
      iarg += 2;
    } else if (keyword == "journal") {
      value(1);
      // An empty value (an unset variable) is an error, not "no journal": say none.
      settings_->journal_path = otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]);
      if (settings_->journal_path == "none") settings_->journal_path.clear();
      journal_keyword_ = true;
      iarg += 2;
    } else if (keyword == "max_calls") {
      value(1);
      settings_->max_reference_calls = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, 1000000000000LL);
      iarg += 2;
      // Optional action: stop (default) ends the run, skip only stops labelling.
      if (iarg < narg && (strcmp(arg[iarg], "stop") == 0 || strcmp(arg[iarg], "skip") == 0)) {
        settings_->budget_stops_run = strcmp(arg[iarg], "stop") == 0;
        iarg++;
      }
    } else if (keyword == "learning_log") {
      value(1);
      settings_->learning_log_path = otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]);
      iarg += 2;
    } else if (keyword == "warm_start") {
      value(1);
      settings_->warm_start_paths.push_back(
          otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]));
      iarg += 2;
    } else if (keyword == "client" || keyword == "client_log" || keyword == "connect_timeout" ||
               keyword == "timeout" || keyword == "retries" || keyword == "not_converged") {
      value(1);
      if (!ipi_settings_)
        error->all(FLERR, "fix otf/train: keyword '{}' belongs to reference ipi (the reference "
                          "here is pair_style {})", keyword, arg[4]);
      otf::IpiReferenceSettings &ipi = *ipi_settings_;
      if (keyword == "client")
        ipi.client_command = otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]);
      else if (keyword == "client_log")
        ipi.client_log = otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]);
      else if (keyword == "not_converged")
        ipi.not_converged_text = otf_keywords::word_value(lmp, "fix otf/train", keyword, arg[iarg + 1]);
      else if (keyword == "connect_timeout")
        ipi.connect_timeout = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0.0, 1e7, true);
      else if (keyword == "timeout")
        ipi.call_timeout = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0.0, 1e7, true);
      else
        ipi.retries = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, 1000);
      iarg += 2;
    } else if (keyword == "max_skips") {
      value(1);
      settings_->max_skipped_in_row = otf_keywords::integer_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0, INT_MAX);
      iarg += 2;
    } else if (keyword == "outlier_factor") {
      value(1);
      settings_->outlier_factor = otf_keywords::real_value(lmp, "fix otf/train", keyword, arg[iarg + 1], 0.0, 1e30);
      if (settings_->outlier_factor > 0.0 && settings_->outlier_factor < 2.0)
        error->all(FLERR, "fix otf/train: outlier_factor must be 0 (off) or at least 2, got {}",
                   arg[iarg + 1]);
      iarg += 2;
    } else {
      error->all(FLERR, "fix otf/train: unknown keyword '{}' (expected one of: {})", keyword,
                 kKeywords);
    }
  }
  if (settings_->save_every > 0 && settings_->save_path.empty())
    error->all(FLERR, "fix otf/train: save_every needs a file: save <path>");
  // The default is the safe policy: the reference drives until the model meets the accuracy.
  if (!drive_given) policy.mode = otf::DriveMode::Auto;
  std::string message;
  try {
    if (policy.mode == otf::DriveMode::Auto && !targets_given) {
      otf::set_default_accuracy(policy, update->unit_style);
      default_accuracy_ = true;
    }
    otf::check_policy_settings(policy);
  } catch (std::exception &e) {
    message = e.what();
  }
  if (!message.empty()) error->all(FLERR, "fix otf/train: {}", message);
}

/* ----------------------------------------------------------------------
   reference ipi unix <name> | inet [<host>:]<port>
------------------------------------------------------------------------- */

void FixOTFTrain::parse_ipi_address(const char *kind, const char *where)
{
  otf::IpiAddress &address = ipi_settings_->address;
  const std::string text = where;
  if (strcmp(kind, "unix") == 0) {
    address.kind = otf::IpiAddress::Kind::Unix;
    // The clients' convention: name NAME is the socket file /tmp/ipi_NAME.
    if (text.empty() || text.find('/') != std::string::npos)
      error->all(FLERR, "fix otf/train: reference ipi unix needs a socket name without '/' (the "
                        "clients' convention: name NAME is the file /tmp/ipi_NAME), got '{}'",
                 text);
    address.name = text;
  } else if (strcmp(kind, "inet") == 0) {
    address.kind = otf::IpiAddress::Kind::Inet;
    const auto colon = text.rfind(':');
    address.name = colon == std::string::npos ? "127.0.0.1" : text.substr(0, colon);
    const std::string port = colon == std::string::npos ? text : text.substr(colon + 1);
    if (address.name.empty())
      error->all(FLERR, "fix otf/train: reference ipi inet: empty host in '{}'", text);
    address.port = otf_keywords::integer_value(lmp, "fix otf/train", "reference ipi inet <port>",
                                               port.c_str(), 0, 65535);
  } else {
    error->all(FLERR, "fix otf/train: reference ipi takes unix <name> or inet [<host>:]<port>, "
                      "got '{}'", kind);
  }
}

/* ----------------------------------------------------------------------
   The i-PI reference listens (rank 0) and starts its client now, so that
   the code's start-up overlaps LAMMPS' setup.
------------------------------------------------------------------------- */

void FixOTFTrain::create_ipi_reference()
{
  otf::IpiReferenceSettings &ipi = *ipi_settings_;
  std::string message;
  try {
    ipi.units = otf::atomic_unit_conversion(update->unit_style);
  } catch (std::exception &e) {
    message = e.what();
  }
  if (!message.empty()) error->all(FLERR, "fix otf/train: reference ipi: {}", message);
  if (!ipi.not_converged_text.empty() && ipi.client_log.empty())
    error->all(FLERR, "fix otf/train: not_converged needs client_log <file>: the text is looked "
                      "for in what the client writes there");
  // Labels from an ab initio code are expensive: journalled unless the input says journal none.
  if (!journal_keyword_) settings_->journal_path = fmt::format("labels-{}.extxyz", id);
  ipi.warn = [this](const std::string &line) {
    error->warning(FLERR, "fix otf/train: {}", line);
  };
  std::unique_ptr<otf::IpiReference> code;
  try {
    code = std::make_unique<otf::IpiReference>(ipi, world);
  } catch (std::exception &e) {
    message = e.what();
  }
  if (!message.empty()) error->all(FLERR, "fix otf/train: reference ipi: {}", message);
  if (comm->me == 0)
    utils::logmesg(lmp, "fix otf/train: i-PI server listening on {}{}\n",
                   code->address().describe(),
                   ipi.client_command.empty() ? " (start the client yourself)"
                                              : ", client started: " + ipi.client_command);
  reference_ = std::make_unique<ExternalCodeReference>(lmp, std::move(code));
}

/* ----------------------------------------------------------------------
   Training-layer failures are agreed over the ranks already: every rank
   stops with the same message. LAMMPS' own errors pass through.
------------------------------------------------------------------------- */

template <typename Body> void FixOTFTrain::reporting_training_errors(Body &&body)
{
  std::string failure;
  try {
    body();
  } catch (otf::TrainingError &e) {
    failure = e.what();
  } catch (otf::RestartFormatError &e) {
    failure = e.what();
  }
  if (!failure.empty()) error->all(FLERR, "fix otf/train: {}", failure);
}

/* ---------------------------------------------------------------------- */

int FixOTFTrain::setmask()
{
  return POST_FORCE;
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::init()
{
  find_model_pair();
  request_lists_and_ghosts();
  if (!trainer_) create_trainer();
  if (!restart_data_.empty()) apply_restart();
}

/* ----------------------------------------------------------------------
   The model of pair_style otf, looked up on every init(): a pair_style
   command between runs deletes the style this fix was set up with.
------------------------------------------------------------------------- */

void FixOTFTrain::find_model_pair()
{
  model_pair_ = dynamic_cast<PairOTF *>(force->pair_match("^otf", 0));
  if (!model_pair_)
    error->all(FLERR, "fix otf/train needs pair_style otf (alone or under hybrid/overlay): it "
                      "trains the model that pair style evaluates");
  if (static_cast<int>(model_pair_->type_species().size()) != atom->ntypes + 1)
    error->all(FLERR, "fix otf/train: pair_coeff * * <element per type> must follow pair_style otf");
  adaptor_.set_species_of_type(model_pair_->type_species());
  // Two fixes would apply two independent optimizer updates to the one model per labelled step.
  for (int i = 0; i < modify->nfix; i++)
    if (modify->fix[i] != this && strcmp(modify->fix[i]->style, "otf/train") == 0)
      error->all(FLERR, "fix otf/train: fix {} already trains the model of pair_style otf; one "
                        "fix otf/train per model (unfix {} or {})",
                 modify->fix[i]->id, modify->fix[i]->id, id);
  if (trainer_ && trainer_->session().potential() != model_pair_->model_session().potential())
    error->all(FLERR, "fix otf/train: pair_style otf was redefined (model '{}') after fix {} "
                      "was set up; the fix trains the model it started with, so it cannot go on: "
                      "unfix {} before the new pair_style and define fix otf/train again after it",
               model_pair_->model_path(), id, id);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::request_lists_and_ghosts()
{
  const double cutoff = model_pair_->model_session().cutoff();
  // The reference: its own neighbour list, at its own cutoff.
  const double reference_cutoff = pair_reference_ ? pair_reference_->init() : 0.0;

  // The frame: a full list of the owned atoms (the centres).
  otf_compat::request_full_fix_list(neighbor, this, instance_me, false);

  // The reference's own list needs ghosts out to its cutoff (LAMMPS sizes the ghost shell by
  // the pair style's cutoff only); the model needs the pair style's shell, which it has.
  const double needed = std::max(cutoff, reference_cutoff) + neighbor->skin;
  // LAMMPS' own ghost shell: the user's comm cutoff or the pair style's cutoff + skin.
  const double shell = std::max(comm->cutghostuser, force->pair->cutforce + neighbor->skin);
  if (shell < needed) {
    if (comm->me == 0 && !ghost_cutoff_warned_)
      error->warning(FLERR, "fix otf/train: ghost cutoff raised to {} (the reference's cutoff + "
                            "skin, as comm_modify cutoff does)", needed);
    ghost_cutoff_warned_ = true;
    comm->cutghostuser = needed;
  }
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::create_trainer()
{
#ifdef OTF_WITH_KOKKOS
  if (lmp->kokkos) {
    // The model is where pair_style otf evaluates it: Kokkos' device for otf/kk, else the host.
    const bool on_host = !model_pair_->kokkosable || utils::strmatch(force->pair_style, "/kk/host");
    settings_->session.kokkos_execution_space = kokkos_execution_space_name(on_host);
    settings_->session.kokkos_device_id = kokkos_device_id(lmp, on_host);
  }
#endif
  // The journal names each atom by its element (pair_coeff * * <element per type>).
  const auto &elements = model_pair_->model_session().elements();
  settings_->type_elements.assign(atom->ntypes + 1, std::string());
  for (int type = 1; type <= atom->ntypes; type++) {
    const int species = model_pair_->type_species()[type];
    if (species >= 0) settings_->type_elements[type] = elements[species];
  }
  settings_->unit_style = update->unit_style;
  otf::TrainerMessages messages;
  messages.log = [this](const std::string &line) {
    utils::logmesg(lmp, "fix otf/train: {}\n", line);
  };
  messages.warn = [this](const std::string &line) {
    error->warning(FLERR, "fix otf/train: {}", line);
  };
  reporting_training_errors([&] {
    trainer_ = std::make_unique<otf::OnTheFlyTrainer>(model_pair_->model_session().potential(),
                                                      *settings_, *reference_, world, messages);
  });
  const otf::TrainingSessionSettings &s = settings_->session;
  const otf::PolicySettings &policy = settings_->policy;
  std::string drive = "drive " + otf::to_string(policy.mode);
  if (policy.mode == otf::DriveMode::Auto && policy.by_accuracy())
    drive += fmt::format(" accuracy {:.6g} {:.6g}{}", policy.target_force_error,
                         policy.target_energy_error,
                         default_accuracy_ ? " (the default accuracy in units " +
                                                 std::string(update->unit_style) + ")"
                                           : std::string());
  else if (policy.mode == otf::DriveMode::Auto)
    drive += fmt::format(" thresholds {} {} {}", policy.hand_over_force_rmse,
                         policy.label_uncertainty, policy.take_over_uncertainty);
  if (comm->me == 0)
    utils::logmesg(lmp,
                   "fix otf/train: reference {}, model cutoff {}, precision {}, {}, "
                   "label every {} steps, {} optimizer step(s) of {} frame(s) per frame, "
                   "buffer {} frames, device {}{}\n",
                   reference_->description(), model_pair_->model_session().cutoff(), s.precision,
                   drive, settings_->policy.label_every, s.steps_per_frame, s.batch_frames,
                   s.buffer_frames, trainer_->session().device_name(),
                   settings_->journal_path.empty() ? std::string()
                                                   : ", label journal " + settings_->journal_path);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::init_list(int /*id*/, NeighList *ptr)
{
  list_ = ptr;
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::setup(int vflag)
{
  trainer_->finish_restart_setup();
  post_force(vflag);
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::post_force(int /*vflag*/)
{
  reporting_training_errors([&] { trainer_->on_step(update->ntimestep, *frame_source_); });
  // The reference-call budget: the run ends after this step (as fix halt's "error continue"
  // does), and the input goes on with its next command.
  if (trainer_->stop_requested() && !timer->is_timeout()) {
    timer->force_timeout();
    budget_stopped_run_ = true;
    if (comm->me == 0)
      utils::logmesg(lmp, "fix otf/train: step {}: {}: the run stops here\n", update->ntimestep,
                     trainer_->stop_reason());
  }
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::post_run()
{
  // Later runs may start (and stop at once while the budget stays spent), as after fix halt's
  // "error continue".
  if (budget_stopped_run_) timer->reset_timeout();
  budget_stopped_run_ = false;
  if (trainer_) reporting_training_errors([&] { trainer_->end_of_run(update->ntimestep); });
  if (trainer_ && comm->me == 0 && settings_->policy.mode == otf::DriveMode::Auto &&
      settings_->policy.by_accuracy())
    utils::logmesg(lmp, "fix otf/train: {}\n", trainer_->calibration_summary());
}

/* ---------------------------------------------------------------------- */

double FixOTFTrain::compute_vector(int n)
{
  if (!trainer_) return n == 14 ? settings_->session.learning_rate : 0.0;
  const otf::TrainingReport &report = trainer_->session().report();
  const otf::TrainerCounters &counters = trainer_->counters();
  const otf::PolicyState &policy = trainer_->policy().state();
  switch (n) {
    case 0: return report.last_loss;
    case 1: return report.energy_rmse_per_atom;
    case 2: return report.force_rmse;
    case 3: return report.stress_rmse;
    case 4: return report.loss_scale;
    case 5: return static_cast<double>(report.skipped_steps);
    case 6: return static_cast<double>(report.optimizer_steps);
    case 7: return static_cast<double>(report.buffer_frames);
    case 8: return static_cast<double>(counters.reference_calls);
    case 9: return counters.max_uncertainty;
    case 10: return policy.reference_drives ? 0.0 : 1.0;
    case 11: return counters.replicas_differ ? 1.0 : 0.0;
    case 12: return static_cast<double>(policy.model_driven_steps);
    case 13: return static_cast<double>(policy.model_phase_labels);
    case 14: return trainer_->session().learning_rate();
    case 15: return static_cast<double>(counters.skipped_labels);
    case 16: return static_cast<double>(trainer_->reference().failed_attempts());
    case 17: return counters.predicted_force_error;
    case 18: return counters.label_force_error;
    default: return 0.0;
  }
}

/* ---------------------------------------------------------------------- */

double FixOTFTrain::memory_usage()
{
  return static_cast<double>(atom->nmax) * sizeof(double);
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

void FixOTFTrain::share_owners()
{
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;
  owner_rank_.assign(nall, -1);
  owner_centre_.assign(nall, -1);
  const int *centre = adaptor_.centre_of_owned();
  for (int i = 0; i < nlocal; i++) {
    owner_rank_[i] = comm->me;
    owner_centre_[i] = centre[i];
  }
  otf_compat::forward_comm_fix(comm, this);
}

/* ---------------------------------------------------------------------- */

int FixOTFTrain::pack_forward_comm(int n, int *list, double *buf, int /*pbc_flag*/, int * /*pbc*/)
{
  for (int k = 0; k < n; k++) {
    buf[2 * k] = owner_rank_[list[k]];
    buf[2 * k + 1] = owner_centre_[list[k]];
  }
  return 2 * n;
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::unpack_forward_comm(int n, int first, double *buf)
{
  for (int k = 0; k < n; k++) {
    owner_rank_[first + k] = static_cast<int>(buf[2 * k]);
    owner_centre_[first + k] = static_cast<int>(buf[2 * k + 1]);
  }
}

/* ---------------------------------------------------------------------- */

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
   Restart: every rank is called (Modify::write_restart); rank 0 writes the
   trainer's archive (training/restart_archive.h) behind LAMMPS' int size.
------------------------------------------------------------------------- */

void FixOTFTrain::write_restart(FILE *fp)
{
  std::string blob;
  if (trainer_)
    reporting_training_errors([&] { blob = trainer_->save_restart(update->ntimestep); });
  else if (!restart_data_.empty())
    blob = restart_data_;    // read but not applied yet: passed on unchanged
  else
    blob = otf::encode_restart(otf::TrainerRestart{});
  if (comm->me != 0) return;
  if (blob.size() > static_cast<size_t>(INT_MAX))
    error->one(FLERR, "fix otf/train: the training state ({} bytes) is too large for a restart "
                      "file", blob.size());
  const int n = static_cast<int>(blob.size());
  fwrite(&n, sizeof(int), 1, fp);
  fwrite(blob.data(), sizeof(char), blob.size(), fp);
}

/* ----------------------------------------------------------------------
   Called on every rank with the same bytes when the fix is defined again;
   applied in init(), once the trainer exists.
------------------------------------------------------------------------- */

void FixOTFTrain::restart(char *buf)
{
  size_t size = 0;
  reporting_training_errors([&] { size = otf::restart_blob_size(buf); });
  restart_data_.assign(buf, size);
  if (trainer_) apply_restart();
}

/* ---------------------------------------------------------------------- */

void FixOTFTrain::apply_restart()
{
  std::string line;
  reporting_training_errors([&] {
    line = trainer_->load_restart(otf::decode_restart(restart_data_.data(), restart_data_.size()));
  });
  restart_data_.clear();
  restart_data_.shrink_to_fit();
  if (comm->me == 0) utils::logmesg(lmp, "fix otf/train: {}\n", line);
}

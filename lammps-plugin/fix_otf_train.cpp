/* ----------------------------------------------------------------------
   OTF-Torch: fix otf/train (doc/fix_otf_train.md). The fix moves data: the
   rank's part of the configuration (its owned atoms as centres, the ghosts
   around them, each ghost named by the rank and centre index of the atom
   it images, shared by forward communication) goes to the training layer's
   trainer (training/on_the_fly_trainer.h) through the one MD-to-model
   adaptor, with a LAMMPS pair style or an i-PI code as the reference.
------------------------------------------------------------------------- */

#include "fix_otf_train.h"

#include "external_code_reference.h"
#include "ipi_reference.h"
#include "lammps_md_arrays.h"
#include "model_session.h"
#include "on_the_fly_trainer.h"
#include "otf_lammps_compat.h"
#include "pair_otf.h"
#include "pair_style_reference.h"
#include "restart_archive.h"
#include "trainer_keywords.h"
#include "trainer_outputs.h"

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
#include "universe.h"
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

  void drive_with(const std::vector<double> &owned_forces) override
  {
    std::copy(owned_forces.begin(), owned_forces.end(), fix_.atom->f[0]);
  }

 private:
  FixOTFTrain &fix_;
};

/* ---------------------------------------------------------------------- */

FixOTFTrain::FixOTFTrain(LAMMPS *lmp, int narg, char **arg) :
    Fix(lmp, narg, arg), frame_source_(std::make_unique<FrameSource>(*this))
{
  vector_flag = 1;
  comm_forward = 2;    // owner rank and centre index of each atom (share_owners)
  size_vector = static_cast<int>(otf::trainer_output_count());
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

  // The training layer reads the keywords (training/trainer_keywords.h); the fix only splits off
  // a pair-style reference and its coeff lines.
  otf::TrainerKeywordContext context;
  context.fix_id = id;
  context.unit_style = update->unit_style;
  context.reference_style = arg[4];
  int first_keyword = 5;
  std::vector<std::vector<std::string>> coeff_lines;
  if (strcmp(arg[4], "ipi") == 0)
    context.reference = otf::ReferenceKind::Ipi;
  else
    first_keyword = split_pair_style_reference(narg, arg, coeff_lines);
  otf::TrainerKeywordSettings parsed;
  std::string message;
  try {
    parsed = otf::parse_trainer_keywords(std::vector<std::string>(arg + first_keyword, arg + narg),
                                         context);
  } catch (std::exception &e) {
    message = e.what();
  }
  if (!message.empty()) error->all(FLERR, "fix otf/train: {}", message);
  settings_ = std::make_unique<otf::TrainerSettings>(std::move(parsed.trainer));
  if (parsed.ipi) {
    create_ipi_reference(std::move(*parsed.ipi));
  } else {
    auto pair_reference =
        std::make_unique<PairStyleReference>(lmp, utils::split_words(arg[4]), std::move(coeff_lines));
    pair_reference_ = pair_reference.get();
    reference_ = std::move(pair_reference);
  }

  FixOTFTrain::grow_arrays(atom->nmax);
  atom->add_callback(Atom::GROW);
  for (int i = 0; i < atom->nmax; i++) force_uncertainty_[i] = 0.0;
}

/* ----------------------------------------------------------------------
   reference "<pair_style args>" coeff "<pair_coeff args>" ... : the coeff
   lines; returns where the keywords start
------------------------------------------------------------------------- */

int FixOTFTrain::split_pair_style_reference(int narg, char **arg,
                                            std::vector<std::vector<std::string>> &coeff_lines)
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
  return iarg;
}

FixOTFTrain::~FixOTFTrain()
{
  atom->delete_callback(id, Atom::GROW);
  trainer_.reset();
  if (walker_roots_ != MPI_COMM_NULL) MPI_Comm_free(&walker_roots_);
  memory->destroy(force_uncertainty_);
}

/* ----------------------------------------------------------------------
   The i-PI reference listens (rank 0) and starts its client now, so that
   the code's start-up overlaps LAMMPS' setup.
------------------------------------------------------------------------- */

void FixOTFTrain::create_ipi_reference(otf::IpiReferenceSettings ipi)
{
  ipi.warn = [this](const std::string &line) {
    error->warning(FLERR, "fix otf/train: {}", line);
  };
  const std::string client = ipi.client_command;
  std::unique_ptr<otf::IpiReference> code;
  std::string message;
  try {
    // Walkers (partitions) each listen on their own address and start their own client.
    if (universe->nworlds > 1)
      ipi.address = otf::walker_address(ipi.address, universe->iworld, universe->nworlds);
    code = std::make_unique<otf::IpiReference>(std::move(ipi), world);
  } catch (std::exception &e) {
    message = e.what();
  }
  if (!message.empty()) error->all(FLERR, "fix otf/train: reference ipi: {}", message);
  if (comm->me == 0)
    utils::logmesg(lmp, "fix otf/train: i-PI server listening on {}{}\n",
                   code->address().describe(),
                   client.empty() ? " (start the client yourself)" : ", client started: " + client);
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
  if (failure.empty()) return;
  // Walkers (partitions) share the model and wait for each other every step: one that stops
  // must stop them all.
  if (universe->nworlds > 1) {
    const std::string message = "fix otf/train: walker " + std::to_string(universe->iworld) +
                                " (partition " + std::to_string(universe->iworld + 1) + "): " +
                                failure;
    // universe_one writes to the job's screen only: the partition's own log says it too.
    if (comm->me == 0) {
      utils::logmesg(lmp, "ERROR: {}\n", message);
      if (logfile) fflush(logfile);
    }
    error->universe_one(FLERR, message);
  }
  error->all(FLERR, "fix otf/train: {}", failure);
}

int FixOTFTrain::setmask()
{
  return POST_FORCE;
}

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

void FixOTFTrain::create_trainer()
{
  // The journal names each atom by its element (pair_coeff * * <element per type>).
  const auto &elements = model_pair_->model_session().elements();
  settings_->type_elements.assign(atom->ntypes + 1, std::string());
  for (int type = 1; type <= atom->ntypes; type++) {
    const int species = model_pair_->type_species()[type];
    if (species >= 0) settings_->type_elements[type] = elements[species];
  }
  otf::TrainerMessages messages;
  messages.log = [this](const std::string &line) {
    utils::logmesg(lmp, "fix otf/train: {}\n", line);
  };
  messages.warn = [this](const std::string &line) {
    error->warning(FLERR, "fix otf/train: {}", line);
  };
  // Every partition is a walker training the one model (training/walker_exchange.h).
  otf::WalkerLayout walkers;
  walkers.walker = universe->iworld;
  walkers.walkers = universe->nworlds;
  if (universe->nworlds > 1 && walker_roots_ == MPI_COMM_NULL) {
    MPI_Comm_split(universe->uworld, comm->me == 0 ? 0 : MPI_UNDEFINED, universe->iworld,
                   &walker_roots_);
  }
  walkers.roots = walker_roots_;
  reporting_training_errors([&] {
    trainer_ = std::make_unique<otf::OnTheFlyTrainer>(model_pair_->model_session().potential(),
                                                      *settings_, *reference_, world, messages,
                                                      walkers);
  });
}

void FixOTFTrain::init_list(int /*id*/, NeighList *ptr)
{
  list_ = ptr;
}

void FixOTFTrain::setup(int vflag)
{
  trainer_->finish_restart_setup();
  post_force(vflag);
}

void FixOTFTrain::post_force(int /*vflag*/)
{
  reporting_training_errors([&] {
    trainer_->on_step(update->ntimestep, *frame_source_, update->ntimestep == update->laststep);
  });
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

void FixOTFTrain::post_run()
{
  // Later runs may start (and stop at once while the budget stays spent), as after fix halt's
  // "error continue".
  if (budget_stopped_run_) timer->reset_timeout();
  budget_stopped_run_ = false;
  if (trainer_) reporting_training_errors([&] { trainer_->end_of_run(update->ntimestep); });
}

double FixOTFTrain::compute_vector(int n)
{
  // The named outputs of the training layer (training/trainer_outputs.h).
  return otf::trainer_output(trainer_.get(), *settings_, static_cast<size_t>(n));
}

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

int FixOTFTrain::pack_forward_comm(int n, int *list, double *buf, int /*pbc_flag*/, int * /*pbc*/)
{
  for (int k = 0; k < n; k++) {
    buf[2 * k] = owner_rank_[list[k]];
    buf[2 * k + 1] = owner_centre_[list[k]];
  }
  return 2 * n;
}

void FixOTFTrain::unpack_forward_comm(int n, int first, double *buf)
{
  for (int k = 0; k < n; k++) {
    owner_rank_[first + k] = static_cast<int>(buf[2 * k]);
    owner_centre_[first + k] = static_cast<int>(buf[2 * k + 1]);
  }
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

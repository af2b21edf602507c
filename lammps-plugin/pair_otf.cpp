/* ----------------------------------------------------------------------
   OTF-Torch: pair_style otf (doc/pair_otf.md).

   One model evaluation per step: the owned and ghost atoms with their
   species, and the full neighbour list of the owned atoms, go to
   otf::ModelSession::evaluate, which adds forces (ghosts included), per-atom
   energies and virials straight into LAMMPS' arrays. With newton on LAMMPS
   folds the ghost forces onto their owners; with newton off this style does
   it with its own reverse communication, so both give the same numbers.
------------------------------------------------------------------------- */

#include "pair_otf.h"

#include "blas_advice.h"
#include "lammps_md_arrays.h"
#include "model_session.h"
#include "pair_style_keywords.h"
#include "otf_lammps_compat.h"
#include "rank_agreement.h"

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"

#include <mpi.h>

#include <optional>
#include <string>
#include <utility>

using namespace LAMMPS_NS;

namespace {

std::string joined(const std::vector<std::string> &words)
{
  std::string text;
  for (const auto &word : words) text += (text.empty() ? "" : " ") + word;
  return text;
}

}    // namespace

/* ---------------------------------------------------------------------- */

PairOTF::PairOTF(LAMMPS *lmp) : Pair(lmp)
{
  single_enable = 0;
  restartinfo = 0;
  one_coeff = 1;
  manybody_flag = 1;
  // The model returns the virial as sum_i x_i f_i over owned and ghost atoms directly.
  no_virial_fdotr_compute = 1;
  // Per-atom virials split each pair's virial equally; no centroid decomposition (as pair sw).
  centroidstressflag = CENTROID_NOTAVAIL;
  // With newton off this style folds ghost forces (3) and per-atom virials (6) itself.
  comm_reverse_off = 9;
}

/* ---------------------------------------------------------------------- */

PairOTF::~PairOTF()
{
  if (copymode) return;
  memory->destroy(atom_energy_uncertainty_);
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

/* ---------------------------------------------------------------------- */

template <typename Body> void PairOTF::on_all_ranks_or_error(const std::string &what, Body &&body)
{
  const std::string failure = otf::first_failure_on_any_rank(world, std::forward<Body>(body));
  if (!failure.empty()) error->all(FLERR, "{}: {}", what, failure);
}

/* ---------------------------------------------------------------------- */

void PairOTF::settings(int narg, char **arg)
{
  // The grammar is the model layer's (potentials/pair_style_keywords.h).
  otf::PairStyleSettings parsed;
  std::string message;
  try {
    parsed = otf::parse_pair_style_keywords(std::vector<std::string>(arg, arg + narg),
                                            kokkos_variant_);
  } catch (std::exception &e) {
    message = e.what();
  }
  // No arguments at all keeps LAMMPS' own wording for a command without its arguments.
  if (!message.empty())
    error->all(FLERR, narg < 1 ? "Illegal pair_style otf command: {}" : "pair_style otf: {}", message);
  const std::string &path = parsed.model_path;
  resident_ = parsed.resident;

  // Rank 0 reads the file (or creates the model from a spec) and every rank loads the same
  // bytes: the replicas are bitwise identical, and a bad file is one clear error.
  std::string bytes;
  std::string read_error;
  if (comm->me == 0) {
    try {
      bytes = otf::model_bytes_from_path(path);
    } catch (std::exception &e) {
      read_error = e.what();
      if (read_error.empty()) read_error = "unknown error";
    }
  }
  otf::broadcast_bytes(read_error, 0, world);
  if (!read_error.empty())
    error->all(FLERR, "pair_style otf: cannot load the model: {}", read_error);
  otf::broadcast_bytes(bytes, 0, world);

  // A new model invalidates the element mapping: pair_coeff must follow.
  session_.reset();
  on_all_ranks_or_error(fmt::format("pair_style otf: model '{}'", path), [&] {
    session_ = std::make_unique<otf::ModelSession>(bytes, parsed.precision, parsed.chunk_size);
  });
  model_path_ = path;
  if (allocated) {
    for (int i = 1; i <= atom->ntypes; i++)
      for (int j = i; j <= atom->ntypes; j++) setflag[i][j] = 0;
  }
  type_species_.clear();

  if (comm->me == 0) {
    utils::logmesg(lmp,
                   "pair_style otf: model '{}' ({}, elements {}, cutoff {} in {} units, "
                   "committee of {}, {} parameters, {} optimizer steps)\n"
                   "  inference precision {}, {} centre atoms per chunk\n",
                   path, session_->architecture(), joined(session_->elements()),
                   session_->cutoff(), session_->units(), session_->committee_size(),
                   session_->dtype(), session_->optimizer_steps(), session_->precision_name(),
                   session_->chunk_size());
  }
}

/* ---------------------------------------------------------------------- */

void PairOTF::allocate()
{
  allocated = 1;
  const int n = atom->ntypes;
  memory->create(setflag, n + 1, n + 1, "pair:setflag");
  for (int i = 1; i <= n; i++)
    for (int j = i; j <= n; j++) setflag[i][j] = 0;
  memory->create(cutsq, n + 1, n + 1, "pair:cutsq");
}

/* ---------------------------------------------------------------------- */

void PairOTF::check_units()
{
  if (session_->units() != update->unit_style)
    error->all(FLERR,
               "pair_style otf: the model '{}' is in '{}' units but this input uses 'units {}'; "
               "use 'units {}' (before the box is created) or a model made for '{}' units",
               model_path_, session_->units(), update->unit_style, session_->units(),
               update->unit_style);
}

/* ----------------------------------------------------------------------
   pair_coeff * * <element or NULL per atom type>
------------------------------------------------------------------------- */

void PairOTF::coeff(int narg, char **arg)
{
  if (!session_) error->all(FLERR, "pair_coeff for pair_style otf before its model is loaded");
  if (!allocated) allocate();

  const int ntypes = atom->ntypes;
  if (narg != 2 + ntypes)
    error->all(FLERR,
               "pair_coeff for pair_style otf: expected '* *' and one element (or NULL) per "
               "atom type ({} types, model elements: {}), got {} argument(s)",
               ntypes, joined(session_->elements()), narg);
  // LAMMPS itself requires "* *" (one_coeff), also under hybrid.
  check_units();

  std::string message;
  try {
    type_species_ = otf::species_of_types(std::vector<std::string>(arg + 2, arg + narg),
                                          session_->elements(), model_path_, force->pair != this);
  } catch (std::exception &e) {
    message = e.what();
  }
  if (!message.empty()) error->all(FLERR, "pair_coeff for pair_style otf: {}", message);

  for (int i = 1; i <= ntypes; i++)
    for (int j = i; j <= ntypes; j++)
      setflag[i][j] = (type_species_[i] >= 0 && type_species_[j] >= 0) ? 1 : 0;
}

/* ---------------------------------------------------------------------- */

void PairOTF::init_style()
{
  if (!session_) error->all(FLERR, "pair_style otf has no model");
  if (static_cast<int>(type_species_.size()) != atom->ntypes + 1)
    error->all(FLERR, "pair_style otf: pair_coeff * * <element per type> must follow pair_style "
                      "otf (the number of atom types changed or no mapping was given)");
  check_units();
  if (domain->dimension != 3)
    error->all(FLERR, "pair_style otf requires a 3d simulation (its models are 3d)");

  // A full list of the owned atoms' neighbours; ghosts need none (the model is local).
  otf_compat::request_full_pair_list(neighbor, this, instance_me);
  adaptor_.set_species_of_type(type_species_);

  // LibTorch's threads follow the rank's OpenMP setting (OMP_NUM_THREADS, package omp, or
  // Kokkos' threads), so ranks x threads never oversubscribe the cores.
  otf::ModelSession::set_intra_op_threads(comm->nthreads);

  // A BLAS running generic kernels on a modern CPU makes every float32 product several times
  // slower: say so once per pair style, instead of running silently slow.
  if (!blas_checked_) {
    blas_checked_ = true;
    if (comm->me == 0)
      if (const std::optional<std::string> advice = otf::blas_advice()) error->warning(FLERR, *advice);
  }
}

/* ---------------------------------------------------------------------- */

double PairOTF::init_one(int i, int j)
{
  if (setflag[i][j] == 0) error->all(FLERR, "All pair coeffs are not set");
  return session_->cutoff();
}

/* ---------------------------------------------------------------------- */

void PairOTF::grow_atom_arrays()
{
  if (atom->nmax <= nmax_) return;
  nmax_ = atom->nmax;
  memory->destroy(atom_energy_uncertainty_);
  memory->create(atom_energy_uncertainty_, nmax_, "pair:otf:atom_energy_uncertainty");
}

/* ---------------------------------------------------------------------- */

void PairOTF::compute(int eflag, int vflag)
{
  ev_init(eflag, vflag);
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;

  // Without newton LAMMPS neither clears nor folds ghost entries: this style does both.
  if (!force->newton) {
    double **f = atom->f;
    for (int i = nlocal; i < nall; i++) f[i][0] = f[i][1] = f[i][2] = 0.0;
    if (vflag_atom)
      for (int i = nlocal; i < nall; i++)
        for (int k = 0; k < 6; k++) vatom[i][k] = 0.0;
  }

  evaluate_listed_centres(md_atoms(atom), md_neighbor_list(list), atom->f[0],
                          eflag_atom ? eatom : nullptr, vflag_atom ? vatom[0] : nullptr);
  if (!force->newton) otf_compat::reverse_comm_pair(comm, this);
}

/* ---------------------------------------------------------------------- */

void PairOTF::evaluate_listed_centres(const otf::MdAtoms &atoms,
                                      const otf::MdNeighborList &neighbors, double *forces,
                                      double *atom_energy, double *atom_virial)
{
  grow_atom_arrays();
  const int nall = atoms.num_local + atoms.num_ghost;
  for (int i = 0; i < nall; i++) atom_energy_uncertainty_[i] = 0.0;
  otf::EvaluationOutputs outputs;
  outputs.forces = forces;
  outputs.atom_energy = atom_energy;
  outputs.atom_virial = atom_virial;
  outputs.atom_energy_uncertainty = atom_energy_uncertainty_;
  evaluate_and_tally(neighbors.inum > 0, [&] {
    return session_->evaluate(adaptor_.listed_centres(atoms, neighbors), outputs);
  });
}

/* ---------------------------------------------------------------------- */

void PairOTF::evaluate_and_tally(bool has_centers,
                                 const std::function<otf::EvaluationTotals()> &evaluation)
{
  if (has_centers) {
    otf::EvaluationTotals totals;
    std::string failure;
    try {
      totals = evaluation();
    } catch (std::exception &e) {
      failure = e.what();
    }
    if (!failure.empty())
      otf_compat::flushing_aborts(lmp, [&] {
        error->one(FLERR, "pair_style {}: model evaluation failed on step {}: {}", style_label(),
                   update->ntimestep, failure);
      });
    if (eflag_global) eng_vdwl += totals.energy;
    if (vflag_global)
      for (int k = 0; k < 6; k++) virial[k] += totals.virial[k];
  }
  last_evaluation_step_ = update->ntimestep;
  last_evaluation_nlocal_ = atom->nlocal;
}

/* ---------------------------------------------------------------------- */

int PairOTF::pack_reverse_comm(int n, int first, double *buf)
{
  double **f = atom->f;
  int m = 0;
  const int last = first + n;
  for (int i = first; i < last; i++) {
    buf[m++] = f[i][0];
    buf[m++] = f[i][1];
    buf[m++] = f[i][2];
    if (vflag_atom)
      for (int k = 0; k < 6; k++) buf[m++] = vatom[i][k];
  }
  return m;
}

/* ---------------------------------------------------------------------- */

void PairOTF::unpack_reverse_comm(int n, int *list_of_atoms, double *buf)
{
  double **f = atom->f;
  int m = 0;
  for (int j = 0; j < n; j++) {
    const int i = list_of_atoms[j];
    f[i][0] += buf[m++];
    f[i][1] += buf[m++];
    f[i][2] += buf[m++];
    if (vflag_atom)
      for (int k = 0; k < 6; k++) vatom[i][k] += buf[m++];
  }
}

/* ---------------------------------------------------------------------- */

double PairOTF::memory_usage()
{
  double bytes = Pair::memory_usage();
  bytes += static_cast<double>(nmax_) * (sizeof(int) + sizeof(double));
  return bytes;
}

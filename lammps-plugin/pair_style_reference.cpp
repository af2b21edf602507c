/* ----------------------------------------------------------------------
   OTF-Torch: a LAMMPS pair style as fix otf/train's reference.
------------------------------------------------------------------------- */

#include "pair_style_reference.h"

#include "otf_lammps_compat.h"

#include "atom.h"
#include "comm.h"
#include "error.h"
#include "force.h"
#include "neighbor.h"
#include "pair.h"

#include <mpi.h>

#include <cstring>
#include <utility>

using namespace LAMMPS_NS;

PairStyleReference::PairStyleReference(LAMMPS *lmp, std::vector<std::string> style_words,
                                       std::vector<std::vector<std::string>> coeff_lines) :
    Pointers(lmp), coeff_lines_(std::move(coeff_lines))
{
  style_ = style_words.front();
  settings_.assign(style_words.begin() + 1, style_words.end());
  int sflag = 0;
  // The plain style, also under -sf kk: the reference runs on the host arrays LAMMPS syncs for
  // the fix, with its own host neighbour list.
  pair_.reset(force->new_pair(style_, 0, sflag));
  if (!pair_) error->all(FLERR, "fix otf/train: unknown reference pair style '{}'", style_);
  otf_compat::flushing_aborts(lmp, [&] {
    std::vector<char *> words;
    for (auto &word : settings_) words.push_back(&word[0]);
    pair_->settings(static_cast<int>(words.size()), words.data());
    for (auto &coeff : coeff_lines_) {
      words.clear();
      for (auto &word : coeff) words.push_back(&word[0]);
      pair_->coeff(static_cast<int>(words.size()), words.data());
    }
  });
}

// Not "= default": C++17 refuses a defaulted destructor whose noexcept differs from the implicit one.
PairStyleReference::~PairStyleReference() noexcept {}

std::string PairStyleReference::description() const
{
  return "pair_style " + style_;
}

double PairStyleReference::init()
{
  const int first_request = otf_compat::neighbor_request_count(neighbor);
  otf_compat::flushing_aborts(lmp, [&] { pair_->init(); });
  const double cutoff = pair_->cutforce;
  otf_compat::set_request_cutoffs_from(neighbor, first_request, cutoff);
  return cutoff;
}

otf::ReferenceLabel PairStyleReference::label(const otf::ReferenceConfiguration & /*configuration*/,
                                              otf::ReferenceUse use)
{
  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;
  double **f = atom->f;
  saved_forces_.assign(f[0], f[0] + 3 * nall);
  std::memset(f[0], 0, sizeof(double) * 3 * nall);

  // As Integrate::ev_set would: global energy and virial, by f.r when the style allows it.
  const int vflag = pair_->no_virial_fdotr_compute ? VIRIAL_PAIR : VIRIAL_FDOTR;
  otf_compat::flushing_aborts(lmp, [&] { pair_->compute(ENERGY_GLOBAL, vflag); });
  if (force->newton_pair) comm->reverse_comm();

  otf::ReferenceLabel label;
  label.owned_forces.assign(f[0], f[0] + 3 * nlocal);
  // Driving: the reference's forces stay (the owned ones count after reverse communication).
  if (use != otf::ReferenceUse::Drive)
    std::memcpy(f[0], saved_forces_.data(), sizeof(double) * 3 * nall);

  double local[7] = {pair_->eng_vdwl + pair_->eng_coul};
  for (int k = 0; k < 6; k++) local[1 + k] = pair_->virial[k];
  double total[7];
  MPI_Allreduce(local, total, 7, MPI_DOUBLE, MPI_SUM, world);
  label.energy = total[0];
  for (int k = 0; k < 6; k++) label.virial[k] = total[1 + k];
  return label;
}

/* ----------------------------------------------------------------------
   OTF-Torch: compute otf/atom (doc/compute_otf_atom.md).
------------------------------------------------------------------------- */

#include "compute_otf_atom.h"

#include "pair_otf.h"

#include "atom.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "update.h"

using namespace LAMMPS_NS;

/* ---------------------------------------------------------------------- */

ComputeOTFAtom::ComputeOTFAtom(LAMMPS *lmp, int narg, char **arg) : Compute(lmp, narg, arg)
{
  if (narg != 3)
    error->all(FLERR, "Illegal compute otf/atom command: expected 'compute ID group otf/atom' "
                      "(no further arguments)");
  peratom_flag = 1;
  size_peratom_cols = 0;
}

/* ---------------------------------------------------------------------- */

ComputeOTFAtom::~ComputeOTFAtom()
{
  memory->destroy(uncertainty_);
}

/* ----------------------------------------------------------------------
   The pair style is looked up on every use: pair_style may be redefined
   between runs, which deletes the previous one.
------------------------------------------------------------------------- */

PairOTF *ComputeOTFAtom::find_pair()
{
  auto *pair = dynamic_cast<PairOTF *>(force->pair_match("^otf", 0));
  if (!pair)
    error->all(FLERR, "compute otf/atom needs pair_style otf (alone, or once under "
                      "pair_style hybrid or hybrid/overlay)");
  return pair;
}

/* ---------------------------------------------------------------------- */

void ComputeOTFAtom::init()
{
  find_pair();
}

/* ---------------------------------------------------------------------- */

void ComputeOTFAtom::compute_peratom()
{
  invoked_peratom = update->ntimestep;
  PairOTF *pair = find_pair();
  const int nlocal = atom->nlocal;
  if (pair->last_evaluation_step() != update->ntimestep || pair->last_evaluation_nlocal() != nlocal)
    error->all(FLERR,
               "compute otf/atom: pair_style otf was not evaluated on step {} (last on step {}); "
               "use this compute where forces are computed: thermo, dump or a fix during a run",
               update->ntimestep, pair->last_evaluation_step());

  if (atom->nmax > nmax_) {
    memory->destroy(uncertainty_);
    nmax_ = atom->nmax;
    memory->create(uncertainty_, nmax_, "otf/atom:uncertainty");
    vector_atom = uncertainty_;
  }

  const double *source = pair->atom_energy_uncertainty();
  const int *mask = atom->mask;
  for (int i = 0; i < nlocal; i++) uncertainty_[i] = (mask[i] & groupbit) ? source[i] : 0.0;
}

/* ---------------------------------------------------------------------- */

double ComputeOTFAtom::memory_usage()
{
  return static_cast<double>(nmax_) * sizeof(double);
}

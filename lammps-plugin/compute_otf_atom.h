/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: compute otf/atom, the committee's per-atom uncertainty (the
   standard deviation over committee members of each atom's energy) from the
   last evaluation of pair_style otf, for dump, thermo (via compute reduce)
   and variables.
------------------------------------------------------------------------- */

#ifndef LMP_COMPUTE_OTF_ATOM_H
#define LMP_COMPUTE_OTF_ATOM_H

#include "compute.h"

namespace LAMMPS_NS {

class ComputeOTFAtom : public Compute {
 public:
  ComputeOTFAtom(class LAMMPS *, int, char **);
  ~ComputeOTFAtom() override;
  void init() override;
  void compute_peratom() override;
  double memory_usage() override;

 private:
  class PairOTF *find_pair();

  int nmax_ = 0;
  double *uncertainty_ = nullptr;
};

}    // namespace LAMMPS_NS

#endif

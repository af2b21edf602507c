/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: pair_style otf/kk (also otf/kk/device, otf/kk/host), the
   KOKKOS package variant of pair_style otf (doc/pair_otf.md, Kokkos). It
   reads positions, types and the neighbour list from the Kokkos views and
   writes forces, per-atom energies and virials into them; the model and its
   evaluation are pair_style otf's. Compiled with LMP_KOKKOS; LibTorch stays
   out of this header as in pair_otf.h.
------------------------------------------------------------------------- */

#ifndef LMP_PAIR_OTF_KOKKOS_H
#define LMP_PAIR_OTF_KOKKOS_H

#include "kokkos_type.h"
#include "otf_lammps_compat.h"
#include "pair_kokkos.h"
#include "pair_otf.h"
#include "pair_otf_kokkos_factory.h"

#include <string>

namespace LAMMPS_NS {

template <class DeviceType> class PairOTFKokkos : public PairOTF {
 public:
  typedef DeviceType device_type;
  typedef ArrayTypes<DeviceType> AT;

  explicit PairOTFKokkos(class LAMMPS *);
  ~PairOTFKokkos() override;

  void compute(int, int) override;
  void init_style() override;
  double memory_usage() override;

 private:
  // Per-atom energy and virial: grown when atoms outgrow them, never reallocated otherwise.
  void grow_per_atom_views();
  void compute_in_host_views();
  void compute_resident();

  bool resident_evaluation_ = false;

  otf_compat::KokkosAtomEnergyView k_eatom;
  otf_compat::KokkosAtomVirialView k_vatom;
};

}    // namespace LAMMPS_NS

#endif

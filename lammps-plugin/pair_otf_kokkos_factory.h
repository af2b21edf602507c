/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: pair_style otf/kk and where Kokkos runs, without Kokkos headers,
   for the plugin's registration (otfplugin.cpp) and fix otf/train's device.
------------------------------------------------------------------------- */

#ifndef LMP_PAIR_OTF_KOKKOS_FACTORY_H
#define LMP_PAIR_OTF_KOKKOS_FACTORY_H

#include <string>

namespace LAMMPS_NS {
class LAMMPS;
class Pair;
// host: the otf/kk/host variant (Kokkos' host execution space).
Pair *create_pair_otf_kokkos(LAMMPS *lmp, bool host);
// The name of Kokkos' device (or host) execution space, e.g. "Serial", "OpenMP", "Cuda", and the
// rank's GPU (-1 on the host): what otf::torch_device_for_kokkos maps to a LibTorch device.
std::string kokkos_execution_space_name(bool host);
int kokkos_device_id(LAMMPS *lmp, bool host);
}    // namespace LAMMPS_NS

#endif

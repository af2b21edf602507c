/* ----------------------------------------------------------------------
   OTF-Torch: pair_style otf/kk (doc/pair_otf.md, Kokkos).

   Views of a host execution space (Serial, OpenMP) are host memory in the
   layouts LAMMPS' plain arrays have (x, f: [n][3] row-major; neighbour rows
   contiguous), so the model reads and writes them in place: the same
   evaluation as pair_style otf, no copies. A device execution space (CUDA)
   needs the model on that device (a CUDA LibTorch); this build refuses it at
   init with a message (otf::torch_device_for_kokkos).
------------------------------------------------------------------------- */

#include "pair_otf_kokkos.h"

#include "otf_model_session.h"

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "comm.h"
#include "error.h"
#include "force.h"
#include "kokkos.h"
#include "memory_kokkos.h"
#include "neigh_list_kokkos.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "update.h"

#include "kokkos_device.h"

#include <exception>
#include <type_traits>

using namespace LAMMPS_NS;

namespace {

// True when DeviceType's memory can be read from the host and its views have the plain arrays'
// layouts: then the model evaluates the views in place.
template <class DeviceType> constexpr bool views_are_host_arrays()
{
  using Memory = typename DeviceType::memory_space;
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible &&
      std::is_same<typename DAT::tdual_x_array::array_layout, Kokkos::LayoutRight>::value &&
      std::is_same<typename DAT::tdual_f_array::array_layout, Kokkos::LayoutRight>::value &&
      std::is_same<typename DeviceType::array_layout, Kokkos::LayoutRight>::value;
}

}    // namespace

/* ---------------------------------------------------------------------- */

template <class DeviceType>
PairOTFKokkos<DeviceType>::PairOTFKokkos(LAMMPS *lmp) : PairOTF(lmp)
{
  if (!lmp->kokkos)
    error->all(FLERR, "pair_style otf/kk needs Kokkos enabled: run lmp with -k on (and -sf kk "
                      "for the kk variants of every style)");
  respa_enable = 0;
  kokkosable = 1;
  atomKK = (AtomKokkos *) atom;
  execution_space = ExecutionSpaceFromDevice<DeviceType>::space;
  datamask_read = X_MASK | F_MASK | TYPE_MASK | ENERGY_MASK | VIRIAL_MASK;
  datamask_modify = F_MASK | ENERGY_MASK | VIRIAL_MASK;
  style_label_ = "otf/kk";
}

/* ---------------------------------------------------------------------- */

template <class DeviceType> PairOTFKokkos<DeviceType>::~PairOTFKokkos()
{
  if (copymode) return;
  memoryKK->destroy_kokkos(k_eatom, eatom);
  memoryKK->destroy_kokkos(k_vatom, vatom);
  eatom = nullptr;
  vatom = nullptr;
}

/* ---------------------------------------------------------------------- */

template <class DeviceType> void PairOTFKokkos<DeviceType>::init_style()
{
  if (!views_are_host_arrays<DeviceType>()) {
    // The only way here is a device build (CUDA): say what it needs rather than misread memory.
    std::string message;
    try {
      otf::torch_device_for_kokkos(kokkos_execution_space_name(false), kokkos_device_id(lmp, false));
      message = "its model evaluation on the Kokkos device is not implemented in this version; "
                "run with the host variant (pair_style otf/kk/host, or suffix kk/host)";
    } catch (std::exception &e) {
      message = e.what();
    }
    error->all(FLERR, "pair_style otf/kk: {}", message);
  }
  if (!force->newton_pair)
    error->all(FLERR, "pair_style otf/kk requires newton_pair on (the plain otf style handles "
                      "newton off)");

  PairOTF::init_style();

  // The request PairOTF made: a full list of the owned atoms, as a Kokkos list of this space.
  NeighRequest *request = neighbor->requests[neighbor->nrequest - 1];
  request->kokkos_host =
      std::is_same<DeviceType, LMPHostType>::value && !std::is_same<DeviceType, LMPDeviceType>::value;
  request->kokkos_device = std::is_same<DeviceType, LMPDeviceType>::value;
  request->half = 0;
  request->full = 1;
  request->ghost = 0;
}

/* ---------------------------------------------------------------------- */

template <class DeviceType> void PairOTFKokkos<DeviceType>::grow_per_atom_views()
{
  if (eflag_atom && static_cast<int>(k_eatom.extent(0)) < maxeatom) {
    memoryKK->destroy_kokkos(k_eatom, eatom);
    memoryKK->create_kokkos(k_eatom, eatom, maxeatom, "pair:eatom");
  }
  if (vflag_atom && static_cast<int>(k_vatom.extent(0)) < maxvatom) {
    memoryKK->destroy_kokkos(k_vatom, vatom);
    memoryKK->create_kokkos(k_vatom, vatom, maxvatom, "pair:vatom");
  }
}

/* ---------------------------------------------------------------------- */

template <class DeviceType> void PairOTFKokkos<DeviceType>::compute(int eflag_in, int vflag_in)
{
  // Per-atom arrays are this style's Kokkos views (alloc = 0), zeroed here.
  ev_init(eflag_in, vflag_in, 0);
  grow_per_atom_views();

  atomKK->sync(execution_space, datamask_read);
  auto x = atomKK->k_x.template view<DeviceType>();
  auto f = atomKK->k_f.template view<DeviceType>();
  auto type = atomKK->k_type.template view<DeviceType>();
  const int nall = atom->nlocal + atom->nghost;

  double *atom_energy = nullptr;
  double *atom_virial = nullptr;
  if (eflag_atom) {
    k_eatom.template sync<DeviceType>();
    auto d_eatom = k_eatom.template view<DeviceType>();
    for (int i = 0; i < nall; i++) d_eatom(i) = 0.0;
    atom_energy = d_eatom.data();
  }
  if (vflag_atom) {
    k_vatom.template sync<DeviceType>();
    auto d_vatom = k_vatom.template view<DeviceType>();
    for (int i = 0; i < nall; i++)
      for (int k = 0; k < 6; k++) d_vatom(i, k) = 0.0;
    atom_virial = d_vatom.data();
  }

  prepare_atoms(type.data());

  // The Kokkos list: ilist, numneigh by list entry, neighbour rows [inum][maxneighs] row-major.
  auto *k_list = static_cast<NeighListKokkos<DeviceType> *>(list);
  auto d_ilist = k_list->d_ilist;
  auto d_numneigh = k_list->d_numneigh;
  auto d_neighbors = k_list->d_neighbors;
  const int inum = list->inum;
  center_neighbor_counts_.resize(inum);
  center_neighbors_.resize(inum);
  const bool has_rows = d_neighbors.extent(1) > 0;
  for (int ii = 0; ii < inum; ii++) {
    const int i = d_ilist(ii);
    center_neighbor_counts_[ii] = d_numneigh(i);
    center_neighbors_[ii] = has_rows ? &d_neighbors(i, 0) : nullptr;
  }
  evaluate_centers(x.data(), d_ilist.data(), inum, f.data(), atom_energy, atom_virial);

  atomKK->modified(execution_space, F_MASK);
  if (eflag_atom) {
    k_eatom.template modify<DeviceType>();
    k_eatom.template sync<LMPHostType>();
  }
  if (vflag_atom) {
    k_vatom.template modify<DeviceType>();
    k_vatom.template sync<LMPHostType>();
  }
}

/* ---------------------------------------------------------------------- */

template <class DeviceType> double PairOTFKokkos<DeviceType>::memory_usage()
{
  double bytes = PairOTF::memory_usage();
  bytes += static_cast<double>(k_eatom.extent(0)) * sizeof(double);
  bytes += static_cast<double>(k_vatom.extent(0)) * 6 * sizeof(double);
  return bytes;
}

/* ---------------------------------------------------------------------- */

std::string LAMMPS_NS::kokkos_execution_space_name(bool host)
{
  return host ? LMPHostType::execution_space::name() : LMPDeviceType::execution_space::name();
}

int LAMMPS_NS::kokkos_device_id(LAMMPS *lmp, bool host)
{
  if (host || !lmp->kokkos || lmp->kokkos->ngpus <= 0) return -1;
  int device = 0;
#ifdef KOKKOS_ENABLE_CUDA
  cudaGetDevice(&device);
#endif
  return device;
}

namespace LAMMPS_NS {
template class PairOTFKokkos<LMPDeviceType>;
#ifdef LMP_KOKKOS_GPU
template class PairOTFKokkos<LMPHostType>;
#endif

Pair *create_pair_otf_kokkos(LAMMPS *lmp, bool host)
{
#ifdef LMP_KOKKOS_GPU
  if (host) return new PairOTFKokkos<LMPHostType>(lmp);
#else
  (void) host;    // one execution space: host and device variants are the same class
#endif
  return new PairOTFKokkos<LMPDeviceType>(lmp);
}
}    // namespace LAMMPS_NS

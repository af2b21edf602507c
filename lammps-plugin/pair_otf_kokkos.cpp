/* ----------------------------------------------------------------------
   OTF-Torch: pair_style otf/kk (doc/pair_otf.md, Kokkos).

   The model lives where the execution space runs (the CPU for Serial and
   OpenMP, this rank's GPU for Cuda). On a GPU (and on the host with
   `resident yes`) the views (positions, types, the Kokkos neighbour list,
   forces, per-atom energies and virials) are wrapped as LibTorch tensors on
   that device with their own strides and the whole evaluation runs there
   (otf::ResidentEvaluator): nothing is copied to the host but the totals and
   the per-atom energy uncertainty. On host spaces the default is pair_style
   otf's host evaluator reading and writing the views in place, which is
   faster on CPUs.
------------------------------------------------------------------------- */

#include "pair_otf_kokkos.h"
#include "otf_lammps_compat.h"

#include "model_session.h"

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


#include <exception>
#include <string>
#include <type_traits>

using namespace LAMMPS_NS;

namespace {

// The view types of DeviceType for positions, forces and per-atom energies and virials as this
// LAMMPS declares them (DualViews before 10 Sep 2025, TransformViews after: otf_lammps_compat.h).
template <class DeviceType> using PositionsView =
    std::decay_t<decltype(std::declval<AtomKokkos &>().k_x.template view<DeviceType>())>;
template <class DeviceType> using ForcesView =
    std::decay_t<decltype(std::declval<AtomKokkos &>().k_f.template view<DeviceType>())>;
template <class DeviceType> using AtomEnergyView = std::decay_t<
    decltype(std::declval<otf_compat::KokkosAtomEnergyView &>().template view<DeviceType>())>;
template <class DeviceType> using AtomVirialView = std::decay_t<
    decltype(std::declval<otf_compat::KokkosAtomVirialView &>().template view<DeviceType>())>;

// True when the KOKKOS package keeps positions, forces and per-atom tallies in double, as the
// model reads and writes them (the default; LAMMPS from 10 Sep 2025 may be built with
// KOKKOS_PREC=single or mixed, where they are float).
template <class DeviceType> constexpr bool views_are_double()
{
  return std::is_same<typename PositionsView<DeviceType>::value_type, double>::value &&
      std::is_same<typename ForcesView<DeviceType>::value_type, double>::value &&
      std::is_same<typename AtomEnergyView<DeviceType>::value_type, double>::value &&
      std::is_same<typename AtomVirialView<DeviceType>::value_type, double>::value;
}

// True when DeviceType's memory can be read from the host and its views have the plain arrays'
// layouts and type: then pair_style otf's host evaluation can read and write them in place.
template <class DeviceType> constexpr bool views_are_host_arrays()
{
  using Memory = typename DeviceType::memory_space;
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible &&
      views_are_double<DeviceType>() &&
      std::is_same<typename PositionsView<DeviceType>::array_layout, Kokkos::LayoutRight>::value &&
      std::is_same<typename ForcesView<DeviceType>::array_layout, Kokkos::LayoutRight>::value &&
      std::is_same<typename DeviceType::array_layout, Kokkos::LayoutRight>::value;
}

// A view's stride along `dimension` in elements (View::stride(r): Kokkos 3.4 to 5.x; Kokkos 5
// removed stride_0()).
template <class View> int64_t stride_of(const View &view, int dimension)
{
  return static_cast<int64_t>(view.stride(dimension));
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
  kokkos_variant_ = true;
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
  // First: the other checks below read the views' layouts, which mean nothing in single precision.
  if constexpr (!views_are_double<DeviceType>())
    error->all(FLERR, "pair_style otf/kk needs the KOKKOS package in double precision "
                      "(LAMMPS built with -D KOKKOS_PREC=double, the default); this LAMMPS keeps "
                      "positions or forces in single precision");
  // The model goes where this style's execution space runs: the CPU for host spaces, the GPU of
  // this rank for Cuda (a LibTorch without CUDA is a clear error here, not a misread pointer).
  const bool on_host = std::is_same<DeviceType, LMPHostType>::value;
  std::string device, placement_error;
  try {
    device = session_->place_on_kokkos_device(kokkos_execution_space_name(on_host),
                                              kokkos_device_id(lmp, on_host));
  } catch (std::exception &e) {
    placement_error = e.what();
  }
  if (!placement_error.empty()) error->all(FLERR, "pair_style otf/kk: {}", placement_error);
  // Host views are evaluated in place by pair_style otf's host evaluator (faster on CPUs);
  // `resident yes` runs the GPU path there instead, `resident no` is impossible on a GPU.
  if (!views_are_host_arrays<DeviceType>() && resident_ == otf::ResidentEvaluation::No)
    error->all(FLERR, "pair_style otf/kk: resident no needs a host execution space; this one "
                      "({}) keeps its views on the device: use resident yes (the default there) "
                      "or pair_style otf/kk/host", kokkos_execution_space_name(on_host));
  resident_evaluation_ = resident_ == otf::ResidentEvaluation::Yes || !views_are_host_arrays<DeviceType>();
  if (comm->me == 0)
    utils::logmesg(lmp, "pair_style otf/kk: Kokkos {} space, model on {}, {} evaluation\n",
                   kokkos_execution_space_name(on_host), device,
                   resident_evaluation_ ? "resident (tensor)" : "host (in place)");
  if (!force->newton_pair)
    error->all(FLERR, "pair_style otf/kk requires newton_pair on (the plain otf style handles "
                      "newton off)");

  PairOTF::init_style();

  // The request PairOTF made: a full list of the owned atoms, as a Kokkos list of this space.
  otf_compat::make_kokkos_list(
      otf_compat::last_request(neighbor),
      std::is_same<DeviceType, LMPHostType>::value && !std::is_same<DeviceType, LMPDeviceType>::value,
      std::is_same<DeviceType, LMPDeviceType>::value);
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
  if (eflag_atom) {
    k_eatom.template sync<DeviceType>();
    Kokkos::deep_copy(k_eatom.template view<DeviceType>(), 0.0);
  }
  if (vflag_atom) {
    k_vatom.template sync<DeviceType>();
    Kokkos::deep_copy(k_vatom.template view<DeviceType>(), 0.0);
  }

  if (resident_evaluation_)
    compute_resident();
  else
    compute_in_host_views();

  atomKK->modified(execution_space, F_MASK);
  // The plain arrays (eatom, vatom) that computes and dumps read are the host side.
  if (eflag_atom) {
    k_eatom.template modify<DeviceType>();
    k_eatom.sync_host();
  }
  if (vflag_atom) {
    k_vatom.template modify<DeviceType>();
    k_vatom.sync_host();
  }
}

/* ----------------------------------------------------------------------
   Host spaces: the views are host memory in the plain arrays' layouts, so
   pair_style otf's evaluation reads and writes them in place.
------------------------------------------------------------------------- */

template <class DeviceType> void PairOTFKokkos<DeviceType>::compute_in_host_views()
{
  if constexpr (views_are_host_arrays<DeviceType>()) {
    auto x = atomKK->k_x.template view<DeviceType>();
    auto f = atomKK->k_f.template view<DeviceType>();
    auto type = atomKK->k_type.template view<DeviceType>();
    otf::MdAtoms atoms;
    atoms.num_local = atom->nlocal;
    atoms.num_ghost = atom->nghost;
    atoms.positions = x.data();
    atoms.types = type.data();

    // The Kokkos list: ilist, numneigh by atom, neighbour rows [atom][maxneighs] row-major.
    auto *k_list = static_cast<NeighListKokkos<DeviceType> *>(list);
    otf::MdNeighborList neighbors;
    neighbors.inum = list->inum;
    neighbors.ilist = k_list->d_ilist.data();
    neighbors.numneigh = k_list->d_numneigh.data();
    neighbors.rows = k_list->d_neighbors.data();
    neighbors.row_stride = stride_of(k_list->d_neighbors, 0);
    neighbors.index_mask = NEIGHMASK;
    evaluate_listed_centres(atoms, neighbors, f.data(),
                            eflag_atom ? k_eatom.template view<DeviceType>().data() : nullptr,
                            vflag_atom ? k_vatom.template view<DeviceType>().data() : nullptr);
  } else {
    error->all(FLERR, "pair_style otf/kk: internal error: host evaluation on device views");
  }
}

/* ----------------------------------------------------------------------
   Any space (the only way on a GPU): the views, with their own strides,
   become LibTorch tensors on the model's device and the whole evaluation
   runs there (otf::ResidentEvaluator); only the totals and the per-atom
   energy uncertainty come back to the host.
------------------------------------------------------------------------- */

template <class DeviceType> void PairOTFKokkos<DeviceType>::compute_resident()
{
  // Single-precision KOKKOS builds stop in init_style(); the model's arrays are double.
  if constexpr (views_are_double<DeviceType>()) {
    grow_atom_arrays();
    auto x = atomKK->k_x.template view<DeviceType>();
    auto f = atomKK->k_f.template view<DeviceType>();
    auto type = atomKK->k_type.template view<DeviceType>();
    const int nlocal = atom->nlocal;
    const int nall = nlocal + atom->nghost;

    otf::ResidentArrays arrays;
    arrays.num_atoms = nall;
    arrays.positions = otf::borrowed_matrix(x.data(), nall, 3, stride_of(x, 0), stride_of(x, 1));
    arrays.types = otf::borrowed_vector(type.data(), nall, stride_of(type, 0));
    arrays.forces = otf::borrowed_matrix(f.data(), nall, 3, stride_of(f, 0), stride_of(f, 1));
    if (eflag_atom) {
      auto d_eatom = k_eatom.template view<DeviceType>();
      arrays.atom_energy = otf::borrowed_vector(d_eatom.data(), nall, stride_of(d_eatom, 0));
    }
    if (vflag_atom) {
      auto d_vatom = k_vatom.template view<DeviceType>();
      arrays.atom_virial =
          otf::borrowed_matrix(d_vatom.data(), nall, 6, stride_of(d_vatom, 0),
                               stride_of(d_vatom, 1));
    }

    // The Kokkos list as it is: ilist, numneigh and neighbour rows by atom index, in the layout of
    // this execution space (rows contiguous on the host, columns contiguous on a GPU).
    auto *k_list = static_cast<NeighListKokkos<DeviceType> *>(list);
    auto d_ilist = k_list->d_ilist;
    auto d_numneigh = k_list->d_numneigh;
    auto d_neighbors = k_list->d_neighbors;
    const int inum = list->inum;
    arrays.centers = otf::borrowed_vector(d_ilist.data(), inum, stride_of(d_ilist, 0));
    arrays.neighbor_counts =
        otf::borrowed_vector(d_numneigh.data(), d_numneigh.extent(0), stride_of(d_numneigh, 0));
    arrays.neighbors = otf::borrowed_matrix(d_neighbors.data(), d_neighbors.extent(0),
                                            d_neighbors.extent(1), stride_of(d_neighbors, 0),
                                            stride_of(d_neighbors, 1));
    arrays.neighbor_index_mask = NEIGHMASK;

    // LibTorch reads the views after every Kokkos kernel and copy that wrote them has finished.
    Kokkos::fence();
    for (int i = 0; i < nall; i++) atom_energy_uncertainty_[i] = 0.0;
    evaluate_and_tally(inum > 0, [&] {
      return session_->evaluate_resident(arrays, type_species_, atom_energy_uncertainty_);
    });
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

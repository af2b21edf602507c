/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: the one place where the plugin's styles meet parts of the
   LAMMPS API that differ between LAMMPS releases (neighbour-list requests,
   reverse communication, exceptions, the KOKKOS package's per-atom view
   types). The styles call these helpers and
   never test a LAMMPS version themselves. Supported: 29 Sep 2021 to
   4 Jul 2026 (docs/lammps-versions.md). OTF_LAMMPS_API_VERSION is the
   release date (YYYYMMDD) of the LAMMPS compiled against (FindOTFLAMMPS).
------------------------------------------------------------------------- */

#ifndef LMP_OTF_LAMMPS_COMPAT_H
#define LMP_OTF_LAMMPS_COMPAT_H

#include "comm.h"
#include "error.h"
#include "exceptions.h"
#include "fix.h"
#include "lammps.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "pair.h"

#ifdef LMP_KOKKOS
#include "kokkos_type.h"
#endif

#include <cstdio>

#ifndef OTF_LAMMPS_API_VERSION
#error "OTF_LAMMPS_API_VERSION (the LAMMPS release as YYYYMMDD) must be defined by the build"
#endif

// The releases that made each change (docs/lammps-versions.md has the evidence). Only the 29 Sep
// 2021, 4 Feb 2025 and 4 Jul 2026 sources were read; releases in between are dated by LAMMPS' own
// "versionchanged" notes and the pull requests, where noted.
// - neighbour-request refactor (lammps/lammps#3159) and the Comm renames (#3148), 24 Mar 2022 in
//   LAMMPS' Developer_updating notes: NeighRequest's members became protected,
//   Neighbor::add_request(requestor, flags) and NeighRequest setters replace them;
//   Comm::reverse_comm_pair(Pair *) became Comm::reverse_comm(Pair *) and
//   Comm::forward_comm_fix(Fix *) Comm::forward_comm(Fix *).
#define OTF_LAMMPS_NEIGH_REQUEST_API 20220324
// - Neighbor::morph_unique adds the skin to a perpetual list's custom cutoff itself: present in
//   4 Feb 2025; most likely first in 3 Aug 2022 (neigh/trim, #3341), not confirmed in a release
//   source. Any date between 29 Sep 2021 and 4 Feb 2025 gives the same result for the three
//   releases that are built and tested.
#define OTF_LAMMPS_SKIN_ADDED_TO_CUSTOM_CUTOFF 20220803
// - exceptions always on, LAMMPS_EXCEPTIONS no longer defined (#3736, opened after 28 Mar 2023):
//   15 Jun 2023 most likely, 2 Aug 2023 at the latest; releases before keep the macro, so the
//   check below is exact for them.
#define OTF_LAMMPS_EXCEPTIONS_ALWAYS_ON 20230615
// - KOKKOS single and mixed precision (lammps/lammps#4608, merged after 22 Jul 2025): per-atom
//   arrays became TransformView pairs of a Kokkos view in KK_FLOAT / KK_ACC_FLOAT and a legacy
//   double view (DAT::ttransform_*), replacing DAT::tdual_efloat_1d, tdual_virial_array and
//   friends. 4 Feb 2025 has the old types, 4 Jul 2026 the new; 10 Sep 2025, the first release
//   after the merge, is not confirmed in its source.
#define OTF_LAMMPS_KOKKOS_TRANSFORM_VIEWS 20250910

namespace LAMMPS_NS {
namespace otf_compat {

#ifdef LMP_KOKKOS
// A pair style's per-atom energy and virial, as a Kokkos view and the plain array LAMMPS reads
// (eatom, vatom), created and destroyed by MemoryKokkos.
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_KOKKOS_TRANSFORM_VIEWS
using KokkosAtomEnergyView = DAT::ttransform_kkacc_1d;
using KokkosAtomVirialView = DAT::ttransform_kkacc_1d_6;
#else
using KokkosAtomEnergyView = DAT::tdual_efloat_1d;
using KokkosAtomVirialView = DAT::tdual_virial_array;
#endif
#endif

// Requests made so far (for styles that request lists inside another style's init()).
inline int neighbor_request_count(Neighbor *neighbor)
{
  return neighbor->nrequest;
}

// Every request from `first` on gets its own cutoff: a list out to `cutoff` plus the skin.
inline void set_request_cutoffs_from(Neighbor *neighbor, int first, double cutoff)
{
  for (int i = first; i < neighbor->nrequest; i++) {
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_SKIN_ADDED_TO_CUSTOM_CUTOFF
    neighbor->requests[i]->set_cutoff(cutoff);
#else
    neighbor->requests[i]->cut = 1;
    neighbor->requests[i]->cutoff = cutoff + neighbor->skin;
#endif
  }
}

// A full neighbour list for a pair style (owned atoms only), returned for further settings.
// `instance` is the requestor's instance_me (protected; newer releases read it themselves).
inline NeighRequest *request_full_pair_list(Neighbor *neighbor, Pair *requestor,
                                            [[maybe_unused]] int instance)
{
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_NEIGH_REQUEST_API
  return neighbor->add_request(requestor, NeighConst::REQ_FULL);
#else
  // The index first: request() may reallocate the requests array.
  const int index = neighbor->request(requestor, instance);
  NeighRequest *request = neighbor->requests[index];
  request->half = 0;
  request->full = 1;
  return request;
#endif
}

// A full neighbour list for a fix, with neighbour rows for the ghost atoms too when `ghost`.
inline void request_full_fix_list(Neighbor *neighbor, Fix *requestor, [[maybe_unused]] int instance,
                                  bool ghost)
{
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_NEIGH_REQUEST_API
  neighbor->add_request(requestor, NeighConst::REQ_FULL | (ghost ? NeighConst::REQ_GHOST : 0));
#else
  const int index = neighbor->request(requestor, instance);
  NeighRequest *request = neighbor->requests[index];
  request->pair = 0;
  request->fix = 1;
  request->half = 0;
  request->full = 1;
  request->ghost = ghost ? 1 : 0;
#endif
}

// The request made last (by the style whose init_style() just ran).
inline NeighRequest *last_request(Neighbor *neighbor)
{
  return neighbor->requests[neighbor->nrequest - 1];
}

// A pair style's request becomes a Kokkos list of the host or the device space.
inline void make_kokkos_list(NeighRequest *request, bool host, bool device)
{
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_NEIGH_REQUEST_API
  request->set_kokkos_host(host ? 1 : 0);
  request->set_kokkos_device(device ? 1 : 0);
#else
  request->kokkos_host = host ? 1 : 0;
  request->kokkos_device = device ? 1 : 0;
#endif
}

// Sends the pair style's ghost-atom data to the owners (Pair::pack_reverse_comm).
inline void reverse_comm_pair(Comm *comm, Pair *pair)
{
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_NEIGH_REQUEST_API
  comm->reverse_comm(pair);
#else
  comm->reverse_comm_pair(pair);
#endif
}

// Sends a fix's owned-atom data to the ghosts (Fix::pack_forward_comm).
inline void forward_comm_fix(Comm *comm, Fix *fix)
{
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_NEIGH_REQUEST_API
  comm->forward_comm(fix);
#else
  comm->forward_comm_fix(fix);
#endif
}

// Whether this plugin was compiled for a LAMMPS that turns errors into C++ exceptions (which
// the load-time check compares with the LAMMPS that loads it).
constexpr bool built_with_lammps_exceptions()
{
#if OTF_LAMMPS_API_VERSION >= OTF_LAMMPS_EXCEPTIONS_ALWAYS_ON || defined(LAMMPS_EXCEPTIONS)
  return true;
#else
  return false;
#endif
}

// LAMMPS 29 Sep 2021 built with LAMMPS_EXCEPTIONS writes Error::one's message to buffered
// output and throws a LAMMPSAbortException, on which lmp's main() calls MPI_Abort without
// flushing: a user whose output goes to a pipe or a file sees no ERROR line. Flushing the screen
// and the log before the exception goes on keeps the line. `body` is code that may call
// Error::one (a reference pair style reading its files, a model evaluation failing on one rank).
template <typename Body> void flushing_aborts(LAMMPS *lmp, Body &&body)
{
  try {
    body();
  } catch (LAMMPSAbortException &) {
    if (lmp->screen) std::fflush(lmp->screen);
    if (lmp->logfile) std::fflush(lmp->logfile);
    std::fflush(stdout);
    throw;
  }
}

}    // namespace otf_compat
}    // namespace LAMMPS_NS

#endif

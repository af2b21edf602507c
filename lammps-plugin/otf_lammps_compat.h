/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: the one place where the plugin's styles meet parts of the
   LAMMPS API that differ between LAMMPS releases (neighbour-list requests,
   reverse communication). The styles call these helpers and never test a
   LAMMPS version themselves. This build targets LAMMPS 29 Sep 2021 (the
   neighbour-request API before the March 2022 refactor: requests are made
   with Neighbor::request and configured through Neighbor::requests[]).
------------------------------------------------------------------------- */

#ifndef LMP_OTF_LAMMPS_COMPAT_H
#define LMP_OTF_LAMMPS_COMPAT_H

#include "comm.h"
#include "error.h"
#include "exceptions.h"
#include "lammps.h"
#include "neigh_request.h"
#include "neighbor.h"

#include <cstdio>

namespace LAMMPS_NS {
namespace otf_compat {

// Requests made so far (for styles that request lists inside another style's init()).
inline int neighbor_request_count(Neighbor *neighbor)
{
  return neighbor->nrequest;
}

// Every request from `first` on gets its own cutoff: `cutoff` plus the neighbour skin.
inline void set_request_cutoffs_from(Neighbor *neighbor, int first, double cutoff)
{
  for (int i = first; i < neighbor->nrequest; i++) {
    neighbor->requests[i]->cut = 1;
    neighbor->requests[i]->cutoff = cutoff + neighbor->skin;
  }
}

// A full neighbour list for a pair style (owned atoms only), returned for further settings.
inline NeighRequest *request_full_pair_list(Neighbor *neighbor, void *requestor, int instance)
{
  // The index first: request() may reallocate the requests array.
  const int index = neighbor->request(requestor, instance);
  NeighRequest *request = neighbor->requests[index];
  request->half = 0;
  request->full = 1;
  return request;
}

// A full neighbour list for a fix, with neighbour rows for the ghost atoms too when `ghost`.
inline void request_full_fix_list(Neighbor *neighbor, void *requestor, int instance, bool ghost)
{
  const int index = neighbor->request(requestor, instance);
  NeighRequest *request = neighbor->requests[index];
  request->pair = 0;
  request->fix = 1;
  request->half = 0;
  request->full = 1;
  request->ghost = ghost ? 1 : 0;
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

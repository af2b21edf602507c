/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: how the LAMMPS styles turn a model-layer exception on any rank
   into one error that every rank reports (no rank left waiting in a
   collective), and how they share bytes (model files, messages) between
   ranks. MPI only; no LAMMPS or LibTorch types.
------------------------------------------------------------------------- */

#ifndef OTF_RANK_AGREEMENT_H
#define OTF_RANK_AGREEMENT_H

#include <mpi.h>

#include <climits>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace otf {

// Broadcasts a byte string of any length from `root` (MPI counts are ints).
inline void broadcast_bytes(std::string &bytes, int root, MPI_Comm world)
{
  long long size = static_cast<long long>(bytes.size());
  MPI_Bcast(&size, 1, MPI_LONG_LONG, root, world);
  bytes.resize(static_cast<size_t>(size));
  const long long piece = INT_MAX / 2;
  for (long long offset = 0; offset < size; offset += piece) {
    const int count = static_cast<int>(size - offset < piece ? size - offset : piece);
    MPI_Bcast(&bytes[offset], count, MPI_CHAR, root, world);
  }
}

// Runs `body` on every rank of `world`. Returns, on every rank, the message of the lowest rank
// whose body threw, or an empty string when none did. The caller reports it with error->all
// outside any try block (LAMMPS errors are exceptions themselves).
template <typename Body> std::string first_failure_on_any_rank(MPI_Comm world, Body &&body)
{
  int me = 0, nprocs = 1;
  MPI_Comm_rank(world, &me);
  MPI_Comm_size(world, &nprocs);
  std::string message;
  int failed = 0;
  try {
    body();
  } catch (std::exception &e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
    failed = 1;
  }
  int first_failed = failed ? me : nprocs;
  MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, world);
  if (first_failed == nprocs) return {};
  broadcast_bytes(message, first_failed, world);
  return message;
}

// A failure of training, the same on every rank (already agreed over the communicator), so the
// MD code may stop every rank with it.
class TrainingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `body` on every rank; when it threw on any, throws TrainingError("<what>: <message>") on
// every rank.
template <typename Body> void agreed_or_throw(MPI_Comm world, const std::string &what, Body &&body)
{
  const std::string failure = first_failure_on_any_rank(world, std::forward<Body>(body));
  if (!failure.empty()) throw TrainingError(what + ": " + failure);
}

}    // namespace otf

#endif

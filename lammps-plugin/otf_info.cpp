#include "otf_info.h"

#include "blas_advice.h"
#include "build_info.h"

#include "comm.h"
#include "error.h"
#include "lammps.h"

#include <mpi.h>

#include <optional>
#include <string>

using namespace LAMMPS_NS;

void OTFInfo::command(int narg, char ** /*arg*/)
{
  if (narg != 0) error->all(FLERR, "otf/info: takes no arguments (got {})", narg);

  const otf::BuildInfo info = otf::build_info();

  // Every rank computes a known LibTorch result; the sum over ranks must equal the closed form.
  const double mine = otf::torch_self_check(comm->me);
  double total = 0.0;
  MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, world);
  const double expected = 64.0 * comm->nprocs * (comm->nprocs + 1) / 2.0;
  if (total != expected)
    error->all(FLERR, "otf/info: LibTorch self-check failed on at least one rank ({} != {})",
               total, expected);

  int min_threads = info.intra_op_threads, max_threads = info.intra_op_threads;
  MPI_Allreduce(MPI_IN_PLACE, &min_threads, 1, MPI_INT, MPI_MIN, world);
  MPI_Allreduce(MPI_IN_PLACE, &max_threads, 1, MPI_INT, MPI_MAX, world);

  if (comm->me == 0) {
    utils::logmesg(lmp, "OTF-Torch {} built for LAMMPS {}, running in LAMMPS {}\n",
                   info.otf_version, OTF_LAMMPS_VERSION_STRING, lmp->version);
    utils::logmesg(lmp, "  LibTorch {}: intra-op threads per rank {}..{}, CUDA {}\n",
                   info.torch_version, min_threads, max_threads,
                   info.cuda_available ? fmt::format("{} device(s)", info.cuda_device_count)
                                       : std::string("not available"));
    utils::logmesg(lmp, "  MPI ranks {}, Kokkos {}\n", comm->nprocs,
                   lmp->kokkos ? "on" : "off");
    utils::logmesg(lmp, "  LibTorch self-check on every rank: passed ({} == {})\n", total,
                   expected);
    const std::optional<std::string> core = otf::openblas_core_name();
    utils::logmesg(lmp, "  BLAS: {}\n", core ? fmt::format("OpenBLAS, {} kernels", *core)
                                              : std::string("no OpenBLAS in this process"));
    if (const std::optional<std::string> advice = otf::blas_advice()) error->warning(FLERR, *advice);
  }
}

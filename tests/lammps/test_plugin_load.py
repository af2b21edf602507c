"""`plugin load` of otfplugin.so works (serial and MPI), and LibTorch computes on every rank.
otf/info names the BLAS kernels LibTorch's float32 products run on, and warns with the
OPENBLAS_CORETYPE to set when an OpenBLAS runs generic kernels on a CPU with AVX2 or AVX-512
(Debian's LibTorch 1.13 with Debian 12's OpenBLAS on new Xeons), and only then.
"""
import re
from pathlib import Path

from lammps_harness import expect, expect_in, find_line, main, run_lammps


def test(ctx):
    result = run_lammps(ctx, f"plugin load {ctx.plugin}\nplugin list\notf/info\n")
    log = result.log
    find_line(rf"^OTF-Torch \S+ plugin \(built for LAMMPS {re.escape(ctx.lammps_version)}, "
              r"LibTorch \S+\)$", log)
    expect_in("command style plugin otf/info", log)
    find_line(rf"^  MPI ranks {ctx.np}, Kokkos off$", log)
    expected = 64 * ctx.np * (ctx.np + 1) // 2
    match = find_line(r"LibTorch self-check on every rank: passed \((\S+) == (\S+)\)", log)
    expect(float(match.group(1)) == expected,
           f"self-check sum {match.group(1)} != {expected} for {ctx.np} ranks")
    blas = find_line(r"^  BLAS: (OpenBLAS, (\S+) kernels|no OpenBLAS in this process)$", log)
    flags = Path("/proc/cpuinfo").read_text().split()
    generic = blas.group(2) is not None and blas.group(2).lower() in ("prescott", "core2", "nehalem",
                                                                      "sandybridge", "atom")
    warned = "OPENBLAS_CORETYPE=" in result.stdout + log
    expect(warned == (generic and "avx2" in flags),
           f"BLAS '{blas.group(1)}', AVX2 {'avx2' in flags}: the OPENBLAS_CORETYPE warning "
           f"{'appears' if warned else 'is missing'}")
    print(f"otf/info: BLAS {blas.group(1)}; OPENBLAS_CORETYPE warning: {'yes' if warned else 'no'}")
    # One rank's output only: the load banner is printed once, not once per rank.
    expect(log.count("OTF-Torch 0.") == 2, "banner and info header should appear once each")


if __name__ == "__main__":
    main(test)

"""`plugin load` of otfplugin.so works (serial and MPI), and LibTorch computes on every rank."""
import re

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
    # One rank's output only: the load banner is printed once, not once per rank.
    expect(log.count("OTF-Torch 0.") == 2, "banner and info header should appear once each")


if __name__ == "__main__":
    main(test)

"""LibTorch's intra-op threads follow the rank's OpenMP setting once pair_style otf is initialised:
OMP_NUM_THREADS, and `package omp N` overriding it, on every rank (otf/info reports the range over
ranks), so that ranks x threads never oversubscribe the cores.
"""
from lammps_harness import fail, find_line, main, run_lammps
from pair_otf_common import plugin_header, write_crystal, write_spec


def threads_after_init(ctx, label, omp_num_threads, package_line):
    data, _ = write_crystal(ctx, "crystal.data", cells=(1, 1, 1))
    spec = write_spec(ctx, "spec.json")
    result = run_lammps(ctx, "\n".join([
        plugin_header(ctx), package_line, f"read_data {data}",
        f"pair_style otf {spec}", "pair_coeff * * Si C", "run 0", "otf/info"]) + "\n",
        name=f"in.{label}", env={"OMP_NUM_THREADS": str(omp_num_threads)})
    match = find_line(r"intra-op threads per rank (\d+)\.\.(\d+)", result.log)
    return int(match.group(1)), int(match.group(2))


def test(ctx):
    cases = [("env-1", 1, "", (1, 1)),
             ("env-2", 2, "", (2, 2)),
             ("package-1", 2, "package omp 1", (1, 1)),
             ("package-2", 1, "package omp 2", (2, 2))]
    for label, env_threads, package_line, expected in cases:
        got = threads_after_init(ctx, label, env_threads, package_line)
        if got != expected:
            fail(f"{label}: OMP_NUM_THREADS={env_threads} {package_line!r}: LibTorch uses "
                 f"{got[0]}..{got[1]} threads per rank, expected {expected[0]}..{expected[1]}")
        print(f"{label}: OMP_NUM_THREADS={env_threads} {package_line or '(no package)'}: "
              f"LibTorch threads per rank {got[0]}..{got[1]}")


if __name__ == "__main__":
    main(test)

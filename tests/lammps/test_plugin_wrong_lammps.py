"""A plugin built for another LAMMPS refuses to load with a clear message instead of crashing."""
import os

from lammps_harness import expect, expect_in, main, run_lammps


def test(ctx):
    other = os.path.join(os.path.dirname(os.path.abspath(ctx.plugin)), "..", "test-plugins",
                         "otf_for_other_lammps.so")
    result = run_lammps(ctx, f"plugin load {other}\nplugin list\nprint DONE\n")
    expect_in("ERROR: OTF-Torch plugin not loaded: it was built for LAMMPS 3 Mar 2020 (20200303) "
              f"but is loaded into LAMMPS version {ctx.lammps_version_id}", result.stderr, "stderr")
    expect_in("Rebuild it against this LAMMPS", result.stderr, "stderr")
    expect("otf/info" not in result.log, "the refused plugin registered a style anyway")
    expect_in("DONE", result.log)


if __name__ == "__main__":
    main(test)

"""LAMMPS loads otfplugin.so by itself from a folder listed in LAMMPS_PLUGIN_PATH."""
import os

from lammps_harness import expect_in, fail, find_line, main, run_lammps


def test(ctx):
    plugin_dir = os.path.dirname(os.path.abspath(ctx.plugin))
    result = run_lammps(ctx, "otf/info\n", env={"LAMMPS_PLUGIN_PATH": f"/nonexistent:{plugin_dir}"})
    find_line(r"^OTF-Torch \S+ plugin \(built for LAMMPS", result.stdout)
    expect_in(f"MPI ranks {ctx.np}", result.log)
    # Without the variable, the command is unknown: the auto-load is what made it work.
    bare = run_lammps(ctx, "otf/info\n", name="in.noplugin", check=False)
    if bare.returncode == 0:
        fail("otf/info worked without LAMMPS_PLUGIN_PATH: the test proves nothing")
    expect_in("Unknown command", bare.stdout + bare.log)


if __name__ == "__main__":
    main(test)

"""The plugin loads under -k on -sf kk, and the Kokkos run gives the plain run's numbers."""
from lammps_harness import expect, expect_close, find_line, main, run_lammps

LJ_MELT = """
units lj
lattice fcc 0.8442
region box block 0 6 0 6 0 6
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 3.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
fix 1 all nve
thermo 10
thermo_style custom step temp pe etotal press
run 50
"""


def test(ctx):
    kokkos = run_lammps(ctx, f"plugin load {ctx.plugin}\notf/info\n" + LJ_MELT,
                        args=["-k", "on", "-sf", "kk"], name="in.kokkos")
    find_line(rf"^  MPI ranks {ctx.np}, Kokkos on$", kokkos.log)
    expect("lj/cut/kk" in kokkos.log or "pair_style lj/cut" in kokkos.log, "no pair style in log")
    plain = run_lammps(ctx, LJ_MELT, name="in.plain")
    for column in ("PotEng", "TotEng", "Press"):
        expect_close(kokkos.last(column), plain.last(column), rtol=1e-10,
                     what=f"{column} after 50 steps, Kokkos vs plain")


if __name__ == "__main__":
    main(test)

"""fix otf/train is data-parallel with a halo exchange (potentials/potential_training.h): each rank
evaluates its owned atoms only, and the forces on its ghosts reach their owners. 1, 2 and 4 MPI
ranks (4 oversubscribed on small machines) give the same training-loss history (f_t[1] at every
labelled step, float32, relative 1e-5) and the same validation force RMSE, and on several ranks
the model replicas are bitwise identical after every step (f_t[12] = 0: the FNV-1a hashes of every
parameter and buffer agree across ranks). Two systems: LJ argon (a pair reference with a cutoff
beyond the model's, which raises the ghost shell) and a triclinic Si crystal under Stillinger-Weber
(a many-body reference; ghosts of other ranks' atoms at every cell face and edge).
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import (ARGON_LJ_REFERENCE, argon_script, plugin_header, relative_error,
                             write_argon_spec, write_crystal, write_spec)

RANKS = (1, 2, 4)


def silicon_script(ctx, data, spec, steps):
    return (plugin_header(ctx) +
            f"read_data {data}\npair_style otf {spec}\npair_coeff * * Si\n"
            f"velocity all create 600 4928 loop geom\nfix nve all nve\ntimestep 0.001\n"
            f'fix t all otf/train reference "sw" coeff "* * Si.sw Si" every 2 steps_per_frame 2 '
            f"batch 3 lr 3e-3 precision float32 drive reference validation 0.3\n"
            f"thermo_style custom step pe f_t[1] f_t[3] f_t[12]\nthermo 2\nrun {steps}\n")


def compare(label, histories):
    rows = {np: [row["f_t[1]"] for row in histories[np]] for np in RANKS}
    expect(max(rows[1]) > 0, f"{label}: no training loss: {rows[1]}")
    for np in RANKS[1:]:
        expect(len(rows[np]) == len(rows[1]) and len(rows[1]) >= 10, f"{label}: thermo lengths differ")
        loss_error = relative_error(rows[np], rows[1])
        rmse_error = relative_error([r["f_t[3]"] for r in histories[np]],
                                    [r["f_t[3]"] for r in histories[1]])
        print(f"{label}: loss history over {len(rows[1])} thermo rows, 1 vs {np} ranks: max relative "
              f"difference {loss_error:.3g}; validation force RMSE {rmse_error:.3g}; replicas identical")
        expect(loss_error <= 1e-5, f"{label}: loss history differs by {loss_error:.3g} on {np} ranks:\n"
                                   f"{rows[1]}\n{rows[np]}")
        expect(rmse_error <= 1e-5, f"{label}: validation force RMSE differs by {rmse_error:.3g} on {np} ranks")


def run_all(ctx, label, script):
    histories = {}
    for np in RANKS:
        result = run_lammps(ctx, script, np=np, name=f"in.{label}.np{np}")
        histories[np] = result.thermo[0]
        mismatches = sum(row["f_t[12]"] for row in histories[np])
        expect(mismatches == 0, f"{label}, np {np}: replicas differed on {mismatches:.0f} thermo steps")
        expect("differ across ranks" not in result.log, f"{label}, np {np}: replica warning in the log")
    compare(label, histories)


def test(ctx):
    spec = write_argon_spec(ctx)
    fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 3 lr 3e-3 precision float32 "
           f"drive reference validation 0.3")
    run_all(ctx, "argon", argon_script(ctx, spec, fix=fix, steps=30, thermo=2))

    data, _ = write_crystal(ctx, "si.data", cells=(2, 2, 2), types=1, tilt=(0.1, -0.05, 0.08))
    si_spec = write_spec(ctx, "si.json", elements=("Si",), cutoff=3.8, dtype="float32",
                         committee_size=2, seed=5)
    run_all(ctx, "silicon", silicon_script(ctx, data, si_spec, steps=24))


if __name__ == "__main__":
    main(test)

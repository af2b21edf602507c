"""fix otf/train is data-parallel: 1 and 2 MPI ranks give the same training-loss history (f_t[1]
at every labelled step, float32, relative 1e-5) and the same validation force RMSE, and on 2 ranks
the model replicas are bitwise identical after every step (f_t[12] = 0: the FNV-1a hashes of every
parameter and buffer agree across ranks).
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, relative_error, write_argon_spec


def test(ctx):
    spec = write_argon_spec(ctx)
    fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 3 lr 3e-3 precision float32 "
           f"drive reference validation 0.3")
    script = argon_script(ctx, spec, fix=fix, steps=30, thermo=2)
    histories = {}
    for np in (1, 2):
        result = run_lammps(ctx, script, np=np, name=f"in.np{np}")
        rows = result.thermo[0]
        histories[np] = rows
        mismatches = sum(row["f_t[12]"] for row in rows)
        expect(mismatches == 0, f"np {np}: replicas differed on {mismatches:.0f} thermo steps")
        if np == 2:
            expect("differ across ranks" not in result.log, "replica warning in the log")
    loss1 = [row["f_t[1]"] for row in histories[1]]
    loss2 = [row["f_t[1]"] for row in histories[2]]
    expect(len(loss1) == len(loss2) and len(loss1) >= 10, "thermo lengths differ")
    expect(max(loss1) > 0, f"no training loss: {loss1}")
    loss_error = relative_error(loss2, loss1)
    rmse_error = relative_error([r["f_t[3]"] for r in histories[2]],
                                [r["f_t[3]"] for r in histories[1]])
    print(f"loss history over {len(loss1)} thermo rows: max relative difference 1 vs 2 ranks "
          f"{loss_error:.3g}; validation force RMSE {rmse_error:.3g}; replicas identical on 2 ranks")
    expect(loss_error <= 1e-5, f"loss history differs by {loss_error:.3g}:\n{loss1}\n{loss2}")
    expect(rmse_error <= 1e-5, f"validation force RMSE differs by {rmse_error:.3g}")


if __name__ == "__main__":
    main(test)

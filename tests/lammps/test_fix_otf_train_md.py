"""fix otf/train does not disturb the MD: with lr 0 (and statistics left as they are) the model
drives exactly the trajectory it drives without the fix, although the reference is evaluated on
every labelled step. The model is saved atomically (no temporary file left) at save_every and at
the end of the run, with a log line each time, and the saved model loads in pair_style otf with
its optimizer step count. A hybrid/overlay reference (lj/cut split into two halves) labels as
the plain style does: the same trajectory and loss history.
"""
import re

from lammps_harness import expect, main, run_lammps
from pair_otf_common import (ARGON_LJ_REFERENCE, argon_script, read_dump, relative_error,
                             write_argon_spec)


def test(ctx):
    spec = write_argon_spec(ctx)
    dump = "dump d all custom 10 {} id x y z fx fy fz\ndump_modify d sort id format float %.15g\n"
    plain = run_lammps(ctx, argon_script(ctx, spec, steps=30, extra=dump.format("plain.dump")),
                       name="in.plain")
    fix = f"{ARGON_LJ_REFERENCE} every 3 lr 0 stats_frames 0 drive model"
    trained = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=30,
                                           extra=dump.format("fix.dump")), name="in.fix")
    expect(trained.last("f_t[9]") == 11, f"reference calls {trained.last('f_t[9]')}, expected 11")
    expect(trained.last("f_t[7]") > 0, "no optimizer step ran")
    a, _ = read_dump(ctx.workdir / "plain.dump")
    b, _ = read_dump(ctx.workdir / "fix.dump")
    values_a = [v for key in sorted(a) for v in a[key]]
    values_b = [v for key in sorted(b) for v in b[key]]
    difference = relative_error(values_b, values_a)
    pe = relative_error(trained.column("PotEng"), plain.column("PotEng"))
    print(f"lr 0: positions and forces after 30 steps differ by {difference:.3g} (relative), "
          f"potential energy by {pe:.3g}")
    expect(difference <= 1e-12 and pe <= 1e-12, "the fix disturbed the MD")

    model = ctx.workdir / "trained.otf"
    fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 lr 3e-3 drive reference "
           f"save {model} save_every 10")
    result = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=20), name="in.save")
    saves = re.findall(r"^fix otf/train: step (\d+): model saved to .* \((.*), (\d+) optimizer",
                       result.log, re.MULTILINE)
    print(f"saves: {saves}")
    expect([s[0] for s in saves] == ["0", "10", "20"], f"unexpected saves {saves}")
    steps = int(saves[-1][2])
    expect(steps == int(result.last("f_t[7]")), f"saved {steps} steps, fix reports "
                                                f"{result.last('f_t[7]')}")
    leftovers = [p.name for p in ctx.workdir.iterdir() if p.name.startswith("trained.otf") and
                 p.name != "trained.otf"]
    expect(not leftovers, f"temporary files left: {leftovers}")
    loaded = run_lammps(ctx, argon_script(ctx, model, steps=0), name="in.load")
    expect(f"{steps} optimizer steps" in loaded.log, "the saved model's step count is not logged")
    print(f"saved model loads in pair_style otf: {steps} optimizer steps, "
          f"pe {loaded.last('PotEng'):.6g}")


    plain_fix = f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 lr 3e-3 drive reference"
    hybrid_fix = ('reference "hybrid/overlay lj/cut 8.5 lj/cut 8.5" '
                  'coeff "* * lj/cut 1 0.0052 3.405" coeff "* * lj/cut 2 0.0052 3.405" '
                  'every 2 steps_per_frame 2 lr 3e-3 drive reference')
    histories = {}
    for name, fix in (("plain", plain_fix), ("hybrid", hybrid_fix)):
        result = run_lammps(ctx, argon_script(ctx, spec, fix=fix, steps=30, thermo=2),
                            name=f"in.reference-{name}")
        histories[name] = result.thermo[-1]
    temperature = relative_error([r["Temp"] for r in histories["hybrid"]],
                                 [r["Temp"] for r in histories["plain"]])
    loss = relative_error([r["f_t[1]"] for r in histories["hybrid"]],
                          [r["f_t[1]"] for r in histories["plain"]])
    print(f"hybrid/overlay reference: temperature history differs by {temperature:.3g}, loss "
          f"history by {loss:.3g} (relative) from the plain lj/cut reference")
    expect(max(r["f_t[1]"] for r in histories["hybrid"]) > 0, "no training with a hybrid reference")
    expect(temperature <= 1e-10 and loss <= 1e-5, "the hybrid reference labels differently")


if __name__ == "__main__":
    main(test)

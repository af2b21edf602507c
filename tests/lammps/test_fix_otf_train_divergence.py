"""Never a silent NaN, never a good model overwritten, and a perfect crystal that trains
(issue 18), on 64-atom diamond silicon learned from Stillinger-Weber:
* lr 1e10 diverges: in float32 and bfloat16 the non-finite steps are skipped, counted and warned
  about, and after max_skips of them in a row the run stops with an error that says what diverged
  and what to change; the model file it would have overwritten keeps its bytes;
* from a perfect lattice (features exactly zero by symmetry) with lr 0 the model's energy stays
  near the crystal's (it went from -25 to -2220 eV in 3 steps before the statistics floor);
* from a perfect lattice, statistics_frames 4 with every 1 (four nearly identical frames): the
  statistics phase goes on until the descriptors stop widening, and training is normal (before, the
  loss was about 60 and the validation force RMSE 1.4 eV/A after 200 steps);
* from a perfect lattice at 300 K and 600 K a 2000-step run with default keywords trains: held-out
  force RMSE against SW below 0.1 eV/A and no non-finite thermo value.
"""
import math

import re

from lammps_harness import expect, main, run_lammps

SPEC = ('{"elements": ["Si"], "cutoff": 5.0, "units": "metal", "committee_size": 4, '
        '"dtype": "float32", "seed": 11, "hyperparameters": {"hidden": [32, 32]}}')


def silicon(ctx, model, fix, *, temperature, steps, extra=""):
    return (f"plugin load {ctx.plugin}\nunits metal\nboundary p p p\natom_modify map array\n"
            f"lattice diamond 5.431\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\n"
            f"create_atoms 1 box\nmass 1 28.0855\n"
            f"velocity all create {2 * temperature} 4928459 mom yes rot yes dist gaussian\n"
            f"timestep 0.001\npair_style otf {model}\npair_coeff * * Si\n"
            f"fix md all nvt temp {temperature} {temperature} 0.1\n"
            f'fix train all otf/train reference "sw" coeff "* * Si.sw Si" {fix}\n'
            f"thermo_style custom step temp pe f_train[1] f_train[3] f_train[6] f_train[7]\n"
            f"thermo_modify format float %.10g\nthermo 50\nrun {steps}\n{extra}")


def finite_thermo(result):
    return all(math.isfinite(v) for block in result.thermo for row in block for v in row.values())


def forces(path):
    """Per snapshot, the forces by atom id of a LAMMPS custom dump (id fx fy fz last)."""
    frames, lines = [], path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("ITEM: ATOMS"):
            columns = line.split()[2:]
            frame, j = {}, i + 1
            while j < len(lines) and not lines[j].startswith("ITEM"):
                row = dict(zip(columns, map(float, lines[j].split())))
                frame[int(row["id"])] = (row["fx"], row["fy"], row["fz"])
                j += 1
            frames.append(frame)
    return frames


def test(ctx):
    spec = ctx.workdir / "si.json"
    spec.write_text(SPEC)
    keep = ctx.workdir / "keep.otf"
    run_lammps(ctx, silicon(ctx, spec, f"every 5 drive reference save {keep}", temperature=600,
                            steps=40), name="in.keep")
    good = keep.read_bytes()

    for precision in ("float32", "bfloat16"):
        result = run_lammps(ctx, silicon(ctx, keep, f"precision {precision} every 1 stats_frames 0 "
                                         f"lr 1e10 drive reference save {keep} max_skips 8",
                                         temperature=600, steps=60),
                            name=f"in.diverge-{precision}", check=False)
        output = result.stdout + result.log
        errors = [line for line in output.splitlines() if line.startswith("ERROR")]
        expect(result.returncode != 0 and errors, f"{precision}: a diverging run did not stop")
        expect("training diverged" in errors[0] and "the last 8 optimizer steps" in errors[0]
               and "lower lr" in errors[0], f"{precision}: unexpected error {errors[0]}")
        expect("non-finite loss or gradients" in output, f"{precision}: no warning on the skip")
        expect(keep.read_bytes() == good, f"{precision}: the good model file was changed")
        print(f"{precision}: {errors[0][:160]}; {keep.name} unchanged")

    # A perfect lattice, weights never changing: the model's energy must stay sane.
    result = run_lammps(ctx, silicon(ctx, spec, "every 1 stats_frames 1 lr 0 drive reference",
                                     temperature=600, steps=150), name="in.perfect-lr0")
    energies = [row["PotEng"] for row in result.thermo[0]][1:]    # after the statistics frame
    print(f"perfect lattice, lr 0: model energy {min(energies):.2f} .. {max(energies):.2f} eV")
    expect(finite_thermo(result), "non-finite thermo value from a perfect lattice")
    expect(all(-400.0 < e < -150.0 for e in energies),
           f"the model's energy ran away from the crystal's (about -277 eV): {energies}")

    # A perfect lattice, statistics from "the first 4 frames" one step apart.
    result = run_lammps(ctx, silicon(ctx, spec, "every 1 stats_frames 4 drive reference",
                                     temperature=600, steps=200), name="in.perfect-every1")
    frozen = re.findall(r"^fix otf/train: step (\d+): descriptor statistics and energy shifts from "
                        r"(\d+) labelled frames \(stats_frames 4, and on until the descriptors "
                        r"stopped widening", result.log, re.MULTILINE)
    last = result.thermo[0][-1]
    print(f"perfect lattice, every 1 stats_frames 4: statistics {frozen}; at step 200 loss "
          f"{last['f_train[1]']:.4g}, validation force RMSE {last['f_train[3]']:.4g} eV/A")
    expect(len(frozen) == 1 and int(frozen[0][1]) > 8,
           f"the statistics phase did not go on past 4 nearly identical frames: {frozen}")
    expect(finite_thermo(result), "non-finite thermo value (every 1 stats_frames 4)")
    expect(last["f_train[1]"] < 3.0 and last["f_train[3]"] < 0.3,
           f"training from unrepresentative statistics: loss {last['f_train[1]']}, validation "
           f"force RMSE {last['f_train[3]']}")

    for temperature in (300, 600):
        model = ctx.workdir / f"crystal-{temperature}.otf"
        heldout, predicted = (ctx.workdir / f"heldout-{temperature}.dump",
                              ctx.workdir / f"model-{temperature}.dump")
        extra = (f"thermo_style custom step temp pe\nunfix train\npair_style sw\n"
                 f"pair_coeff * * Si.sw Si\nvelocity all create {2 * temperature} 87287 mom yes "
                 f"rot yes dist gaussian\nrun 1000\ndump h all custom 50 {heldout} id x y z fx fy fz\n"
                 f"dump_modify h sort id format float %.10g\nrun 1000\nundump h\n"
                 f"pair_style otf {model}\npair_coeff * * Si\n"
                 f"dump m all custom 1 {predicted} id fx fy fz\n"
                 f"dump_modify m sort id format float %.10g\n"
                 f"rerun {heldout} dump x y z box yes\n")
        result = run_lammps(ctx, silicon(ctx, spec, f"save {model}",
                                         temperature=temperature, steps=2000, extra=extra),
                            name=f"in.crystal-{temperature}")
        reference, learned = forces(heldout), forces(predicted)
        squares = [(a - b) ** 2 for fa, fb in zip(reference, learned) for atom in fa
                   for a, b in zip(fa[atom], fb[atom])]
        rmse = math.sqrt(sum(squares) / len(squares))
        print(f"perfect lattice at {temperature} K: held-out force RMSE {rmse:.4f} eV/A over "
              f"{len(reference)} configurations")
        expect(len(reference) == len(learned) == 21, "held-out dumps incomplete")
        expect(finite_thermo(result), f"{temperature} K: non-finite thermo value")
        expect(rmse < 0.1, f"{temperature} K: held-out force RMSE {rmse:.4f} >= 0.1 eV/A")


if __name__ == "__main__":
    main(test)

"""pair_style otf/kk under -k on -sf kk (Kokkos Serial here) gives the plain style's numbers: total
energy, pressure tensor, per-atom energy and virial sums and every force, at step 0 and after 20
MD steps, relative 1e-12 with a float64 model, serial and on 2 ranks; the kk/host variant too,
and `resident yes`: the tensor path a GPU run takes (views wrapped as tensors, the evaluation as
tensor operations), here on the host.
fix otf/train with the model under Kokkos has the plain run's training-loss history and
validation force RMSE in float32, bfloat16 and float16 (relative 1e-6), and logs its device.
otf/kk without Kokkos enabled, with newton_pair off, `resident` on the plain style and a bad
`resident` value are clean errors.
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import (ARGON_LJ_REFERENCE, argon_script, read_dump, relative_error,
                             write_argon_spec, write_spec)

COLUMNS = ["PotEng", "Press", "Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz", "c_spe", "c_ssa[1]",
           "c_ssa[2]", "c_ssa[3]", "c_ssa[4]", "c_ssa[5]", "c_ssa[6]"]


def crystal(ctx, spec, dump, newton="on", options=""):
    return f"""plugin load {ctx.plugin}
newton {newton}
units metal
atom_modify map array
lattice diamond 5.431
region box block 0 3 0 3 0 3
create_box 1 box
create_atoms 1 box
mass 1 28.0855
displace_atoms all random 0.1 0.1 0.1 4 units box
velocity all create 1000 7 loop geom
pair_style otf {spec}{options}
pair_coeff * * Si
compute pe all pe/atom
compute sa all stress/atom NULL
compute spe all reduce sum c_pe
compute ssa all reduce sum c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
fix nve all nve
thermo_style custom step pe press pxx pyy pzz pxy pxz pyz c_spe c_ssa[1] c_ssa[2] c_ssa[3] &
    c_ssa[4] c_ssa[5] c_ssa[6]
thermo_modify format float %.16g
dump d all custom 20 {dump} id fx fy fz c_pe c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
dump_modify d sort id format float %.16g
thermo 10
run 20
"""


def test(ctx):
    spec = write_spec(ctx, "si64.json", elements=("Si",), dtype="float64", committee_size=2)
    plain = run_lammps(ctx, crystal(ctx, spec, "plain.dump"), name="in.plain")
    plain_atoms, _ = read_dump(ctx.workdir / "plain.dump")
    kokkos = ["-k", "on", "-sf", "kk"]
    for label, args, options in (("kk", kokkos, ""), ("kk-host", ["-k", "on", "-sf", "kk/host"], ""),
                                 ("kk-resident", kokkos, " resident yes")):
        run = run_lammps(ctx, crystal(ctx, spec, f"{label}.dump", options=options), args=args,
                         name=f"in.{label}")
        expect("pair otf/kk" in run.stdout + run.log, f"{label}: pair_style otf/kk was not used")
        path = "resident (tensor)" if options else "host (in place)"
        expect(f"model on cpu, {path} evaluation" in run.log, f"{label}: not the {path} path")
        worst = 0.0
        for row_plain, row_kk in zip(plain.thermo[-1], run.thermo[-1]):
            worst = max(worst, relative_error([row_kk[c] for c in COLUMNS],
                                              [row_plain[c] for c in COLUMNS]))
        kk_atoms, _ = read_dump(ctx.workdir / f"{label}.dump")
        expect(sorted(kk_atoms) == sorted(plain_atoms), f"{label}: atoms differ")
        per_atom = relative_error([v for i in sorted(kk_atoms) for v in kk_atoms[i]],
                                  [v for i in sorted(plain_atoms) for v in plain_atoms[i]])
        print(f"{label} (np {ctx.np}): energy, pressure tensor, per-atom sums over 20 steps "
              f"differ by {worst:.3g}; forces, per-atom energy and virial at step 20 by "
              f"{per_atom:.3g} (relative)")
        expect(worst <= 1e-12 and per_atom <= 1e-12, f"{label} differs from pair_style otf")

    argon = write_argon_spec(ctx)
    for precision in ("float32", "bfloat16", "float16"):
        fix = (f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 2 lr 3e-3 validation 0.3 "
               f"precision {precision}")
        runs = {}
        # The model drives (drive model, the default): the pair style's forces move the atoms.
        for label, args, options in (("plain", [], ""), ("kk", kokkos, ""),
                                     ("kk-resident", kokkos, " resident yes")):
            text = argon_script(ctx, argon, fix=fix, steps=30, thermo=2)
            text = text.replace(f"pair_style otf {argon}\n", f"pair_style otf {argon}{options}\n")
            runs[label] = run_lammps(ctx, text, args=args, name=f"in.train-{precision}-{label}")
        for label in ("kk", "kk-resident"):
            expect("device cpu" in runs[label].log, "fix otf/train does not log its device")
            path = "resident (tensor)" if label == "kk-resident" else "host (in place)"
            expect(f"{path} evaluation" in runs[label].log, f"{label}: not the {path} path")
            loss = relative_error([r["f_t[1]"] for r in runs[label].thermo[-1]],
                                  [r["f_t[1]"] for r in runs["plain"].thermo[-1]])
            rmse = relative_error([r["f_t[3]"] for r in runs[label].thermo[-1]],
                                  [r["f_t[3]"] for r in runs["plain"].thermo[-1]])
            energy = relative_error([r["PotEng"] for r in runs[label].thermo[-1]],
                                    [r["PotEng"] for r in runs["plain"].thermo[-1]])
            steps = runs[label].last("f_t[7]")
            print(f"training {precision}, {label} (np {ctx.np}): loss history differs by "
                  f"{loss:.3g}, validation force RMSE by {rmse:.3g}, the driving model's energy "
                  f"by {energy:.3g} ({steps:.0f} optimizer steps)")
            expect(steps > 0 and loss <= 1e-6 and rmse <= 1e-6 and energy <= 1e-6,
                   f"{precision}, {label}: training differs")

    no_kokkos = run_lammps(ctx, crystal(ctx, spec, "x.dump").replace("pair_style otf ",
                                                                     "pair_style otf/kk "),
                           name="in.no-kokkos", check=False)
    expect(no_kokkos.returncode != 0 and "needs Kokkos enabled" in no_kokkos.stdout + no_kokkos.log,
           "otf/kk without -k on is not a clean error")
    newton_off = run_lammps(ctx, crystal(ctx, spec, "y.dump", newton="off"),
                            args=["-k", "on", "-sf", "kk"], name="in.newton-off", check=False)
    expect(newton_off.returncode != 0 and "requires newton_pair on" in
           newton_off.stdout + newton_off.log, "otf/kk with newton off is not a clean error")
    plain_resident = run_lammps(ctx, crystal(ctx, spec, "z.dump", options=" resident yes"),
                                name="in.plain-resident", check=False)
    expect(plain_resident.returncode != 0 and "'resident' is for the Kokkos variant" in
           plain_resident.stdout + plain_resident.log, "resident on plain otf is not a clean error")
    bad_value = run_lammps(ctx, crystal(ctx, spec, "w.dump", options=" resident maybe"),
                           args=kokkos, name="in.bad-resident", check=False)
    expect(bad_value.returncode != 0 and "resident must be 'yes' or 'no' (got 'maybe')" in
           bad_value.stdout + bad_value.log, "a bad resident value is not a clean error")
    print("otf/kk without -k on, with newton off, resident on plain otf, resident maybe: clean "
          "errors")


if __name__ == "__main__":
    main(test)

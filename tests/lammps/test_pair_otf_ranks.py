"""pair_style otf gives the same energy, forces, virial, per-atom energies and virials and
per-atom uncertainties on 1, 2 and 4 MPI ranks with newton on and off (relative 1e-10, float64
model): a triclinic two-element crystal, a crystal filling half of its box so that ranks own no
atoms (processors N 1 1), and a box smaller than the cutoff (many periodic images of each atom).
The two-rank runs also evaluate in chunks of 7 centre atoms. The same holds after 20 MD steps with
re-neighbouring and atom sorting every 5 steps (atoms migrate and are reordered).
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import (plugin_header, read_dump, read_values, relative_error,
                             write_crystal, write_spec)

TOLERANCE = 1e-10
PER_ATOM = ["fx", "fy", "fz", "c_pe", "c_s[1]", "c_s[2]", "c_s[3]", "c_s[4]", "c_s[5]",
            "c_s[6]", "c_u"]


def script(ctx, data, spec, newton, processors, dump, keywords):
    virial = " ".join(f"$(c_virial[{k}])" for k in range(1, 7))
    return "\n".join([
        plugin_header(ctx, newton=newton),
        f"processors {processors}" if processors else "",
        "boundary p p p", f"read_data {data}",
        f"pair_style otf {spec} {keywords}", "pair_coeff * * Si C",
        "compute virial all pressure NULL virial",
        "compute pe all pe/atom", "compute s all stress/atom NULL virial",
        "compute u all otf/atom", "compute umax all reduce max c_u",
        "thermo_style custom step pe c_virial[1] c_umax",
        f"dump d all custom 1 {dump} id {' '.join(PER_ATOM)} proc",
        "dump_modify d format float %.17g sort id",
        "run 0",
        f"print \"TOTALS $(pe) {virial} $(c_umax)\"",
        "undump d",
        # A short MD run with forced re-neighbouring and atom sorting: atoms migrate between
        # ranks and are reordered, and the per-atom outputs must follow them.
        "velocity all create 900 5 loop geom", "fix nve all nve",
        "neigh_modify every 5 delay 0 check no", "atom_modify sort 5 1.0",
        f"dump md all custom 20 md-{dump} id x y z {' '.join(PER_ATOM)} proc",
        "dump_modify md format float %.17g sort id",
        "run 20",
        f"print \"MD $(pe) {virial} $(c_umax)\"",
    ]) + "\n"


def compare(label, reference, candidate, names=PER_ATOM):
    ref_totals, ref_atoms = reference
    totals, atoms = candidate
    error = relative_error(totals[:7], ref_totals[:7])
    expect(error <= TOLERANCE, f"{label}: energy/virial {totals[:7]} differ from the serial "
                               f"newton-on run {ref_totals[:7]} by {error:.3g} relative")
    expect(sorted(atoms) == sorted(ref_atoms), f"{label}: different atoms in the dump")
    worst = 0.0
    for column in range(len(names)):
        values = [atoms[i][column] for i in sorted(atoms)]
        expected = [ref_atoms[i][column] for i in sorted(ref_atoms)]
        column_error = relative_error(values, expected)
        expect(column_error <= TOLERANCE,
               f"{label}: per-atom {names[column]} differs from the serial newton-on run by "
               f"{column_error:.3g} relative")
        worst = max(worst, column_error)
    return max(error, worst)


def read_per_atom(path):
    """Dump rows without their last column (the owning rank) and the set of owning ranks."""
    atoms, _ = read_dump(path)
    owners = {int(atom.pop()) for atom in atoms.values()}
    return atoms, owners


def check_system(ctx, label, data, spec, processors_for, owners_for=None):
    reference = md_reference = None
    worst = md_worst = 0.0
    for np in (1, 2, 4):
        for newton in ("on", "off"):
            dump = f"{label}-np{np}-{newton}.dump"
            # Two ranks also evaluate in chunks of 7 centres: chunking must not change results.
            keywords = "chunk 7" if np == 2 else ""
            result = run_lammps(ctx, script(ctx, data, spec, newton, processors_for(np), dump,
                                            keywords),
                                np=np, name=f"in.{label}-np{np}-{newton}")
            atoms, owners = read_per_atom(ctx.workdir / dump)
            step0 = (read_values(result.log, "TOTALS")[-1], atoms)
            md = (read_values(result.log, "MD")[-1], read_per_atom(ctx.workdir / f"md-{dump}")[0])
            if owners_for:
                expect(owners == owners_for(np), f"{label} np {np}: atoms are owned by ranks "
                                                 f"{sorted(owners)}, expected {owners_for(np)}")
            if reference is None:
                reference, md_reference = step0, md
                expect(abs(step0[0][0]) > 0 and max(abs(v) for v in step0[0][1:7]) > 0,
                       f"{label}: energy or virial is zero; nothing would be compared")
                continue
            case = f"{label} np {np} newton {newton}"
            worst = max(worst, compare(case, reference, step0))
            md_worst = max(md_worst, compare(f"{case} after MD", md_reference, md,
                                             ["x", "y", "z"] + PER_ATOM))
    print(f"{label}: 1/2/4 ranks x newton on/off agree to {worst:.3g} relative "
          f"(tolerance {TOLERANCE}); after 20 MD steps (positions too) to {md_worst:.3g}")


def test(ctx):
    spec = write_spec(ctx, "spec.json", cutoff=4.0)
    data, _ = write_crystal(ctx, "triclinic.data", cells=(2, 2, 2), tilt=(0.2, 0.1, -0.15))
    check_system(ctx, "triclinic", data, spec, lambda np: None)

    # The crystal fills 0.5 < x < 11.4 of a 24.7 wide box: with processors N 1 1 the upper half
    # of the ranks own no atoms (and hold a few ghosts, or none).
    data, _ = write_crystal(ctx, "half-empty.data", cells=(2, 2, 2), vacuum_x=2 * 5.43 + 3.0,
                            offset_x=0.5, seed=3)
    check_system(ctx, "empty-ranks", data, spec, lambda np: f"{np} 1 1" if np > 1 else None,
                 owners_for=lambda np: set(range(max(np // 2, 1))))

    # Cutoff 6.0 in a 5.43 x 5.43 x 10.86 box: more than one periodic image within the cutoff.
    wide_spec = write_spec(ctx, "wide.json", cutoff=6.0)
    data, _ = write_crystal(ctx, "small-box.data", cells=(1, 1, 2), seed=5)
    check_system(ctx, "cutoff-beyond-box", data, wide_spec, lambda np: None)


if __name__ == "__main__":
    main(test)

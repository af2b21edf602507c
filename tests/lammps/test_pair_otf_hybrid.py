"""pair_style otf under hybrid/overlay, with NULL for a type left to another style: the otf part
sees only its own atoms, exactly as if the other atoms were absent (energy, forces and virial to
1e-12 relative), and compute otf/atom finds the sub-style.
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import plugin_header, read_dump, read_values, relative_error, write_crystal
from pair_otf_common import write_spec

TOLERANCE = 1e-12


def test(ctx):
    data, _ = write_crystal(ctx, "crystal.data", cells=(2, 2, 1), tilt=(0.1, 0.0, 0.0), seed=11)
    spec = write_spec(ctx, "spec.json", elements=["Si"], cutoff=4.0)
    virial = " ".join(f"$(c_virial[{k}])" for k in range(1, 7))

    # Type 1 is Si for otf; type 2 only interacts through lj/cut, whose forces are switched off
    # (pair_modify compute no) so that the dumped forces are otf's alone.
    hybrid = ctx.workdir / "hybrid.dump"
    result = run_lammps(ctx, "\n".join([
        plugin_header(ctx), f"read_data {data}",
        f"pair_style hybrid/overlay otf {spec} lj/cut 3.0",
        "pair_coeff * * otf Si NULL", "pair_coeff * * lj/cut 0.01 2.0",
        "compute eotf all pair otf",
        "compute virial all pressure NULL virial",
        "pair_modify pair lj/cut compute no",
        "compute u all otf/atom", "compute umax all reduce max c_u",
        "thermo_style custom step pe c_eotf c_umax c_virial[1]",
        f"dump d all custom 1 {hybrid} id type fx fy fz c_u",
        "dump_modify d format float %.17g sort id",
        "run 0",
        f"print \"HYBRID $(c_eotf) $(pe) {virial} $(c_umax)\"",
    ]) + "\n", name="in.hybrid", np=1)
    hybrid_values = read_values(result.log, "HYBRID")[-1]
    hybrid_atoms, _ = read_dump(hybrid)

    alone = ctx.workdir / "alone.dump"
    result = run_lammps(ctx, "\n".join([
        plugin_header(ctx), f"read_data {data}",
        "group others type 2", "delete_atoms group others compress no",
        f"pair_style otf {spec}", "pair_coeff * * Si Si",
        "compute virial all pressure NULL virial",
        "compute u all otf/atom",
        f"dump d all custom 1 {alone} id type fx fy fz c_u",
        "dump_modify d format float %.17g sort id",
        "thermo_style custom step pe c_virial[1]",
        "run 0",
        f"print \"ALONE $(pe) {virial}\"",
    ]) + "\n", name="in.alone", np=1)
    alone_values = read_values(result.log, "ALONE")[-1]
    alone_atoms, _ = read_dump(alone)

    expect(abs(hybrid_values[0] - hybrid_values[1]) <= TOLERANCE * abs(hybrid_values[0]),
           f"with lj/cut switched off the energy {hybrid_values[1]} must be otf's "
           f"{hybrid_values[0]}")
    energy_error = abs(hybrid_values[0] - alone_values[0]) / abs(alone_values[0])
    virial_error = relative_error(hybrid_values[2:8], alone_values[1:7])
    expect(energy_error <= TOLERANCE, f"otf energy under hybrid {hybrid_values[0]!r} != alone "
                                      f"{alone_values[0]!r}")
    expect(virial_error <= TOLERANCE, f"otf virial under hybrid {hybrid_values[2:8]} != alone "
                                      f"{alone_values[1:7]}")
    expect(len(alone_atoms) > 0 and all(atom[0] == 1 for atom in alone_atoms.values()),
           "the reference run should hold type-1 atoms only")
    forces = [v for i in sorted(alone_atoms) for v in hybrid_atoms[i][1:5]]
    expected = [v for i in sorted(alone_atoms) for v in alone_atoms[i][1:5]]
    force_error = relative_error(forces, expected)
    expect(force_error <= TOLERANCE, f"otf forces/uncertainties under hybrid differ from the "
                                     f"model alone by {force_error:.3g} relative")
    others = [atom for atom in hybrid_atoms.values() if atom[0] == 2]
    expect(others and all(atom[1:5] == [0.0, 0.0, 0.0, 0.0] for atom in others),
           "atoms of the NULL type must get no otf force and no uncertainty")
    expect(hybrid_values[-1] > 0, "compute otf/atom under hybrid gives zero uncertainties")
    print(f"hybrid/overlay: energy {energy_error:.3g}, virial {virial_error:.3g}, forces and "
          f"uncertainties {force_error:.3g} relative to the model alone")


if __name__ == "__main__":
    main(test)

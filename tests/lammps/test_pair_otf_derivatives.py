"""pair_style otf: forces are minus the gradient of the energy (LAMMPS' fix numdiff, central
differences) and the virial is minus the strain derivative of the energy (change_box by +-h along
xx yy zz xy xz yz), for an orthogonal and a triclinic two-element box (the triclinic one smaller
than twice the cutoff). Relative errors (Euclidean norm of the difference over the norm of all
components) 1e-6 with a float64 model, 1e-4 with a float32 one. The same runs
check that per-atom energies sum to the energy and per-atom virials to the virial (1e-10).
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import (max_abs, plugin_header, read_dump, read_values, relative_error,
                             relative_norm_error, write_crystal, write_spec)

NKTV2P_METAL = 1.6021765e6  # LAMMPS' pressure conversion of metal units (update.cpp)
COMPONENTS = ["xx", "yy", "zz", "xy", "xz", "yz"]
AXES = {"x": 0, "y": 1, "z": 2}


def strained_box(box, component, delta):
    """Box (lx, ly, lz, xy, xz, yz) after x -> (1 + delta e_a e_b^T) x for component 'ab'."""
    lx, ly, lz, xy, xz, yz = box
    cell = [[lx, 0.0, 0.0], [xy, ly, 0.0], [xz, yz, lz]]  # rows: a, b, c
    a, b = AXES[component[0]], AXES[component[1]]
    for vector in cell:
        vector[a] += delta * vector[b]
    (nlx, _, _), (nxy, nly, _), (nxz, nyz, nlz) = cell
    return nlx, nly, nlz, nxy, nxz, nyz


def script(ctx, data, spec, box, triclinic, deltas_x, delta_strain, steps):
    virial = " ".join(f"c_virial[{k}]" for k in range(1, 7))
    stress_sum = " ".join(f"c_ssum[{k}]" for k in range(1, 7))
    lines = [plugin_header(ctx), "boundary p p p", f"read_data {data}",
             f"pair_style otf {spec}", "pair_coeff * * Si C",
             "compute virial all pressure NULL virial",
             "compute peatom all pe/atom", "compute satom all stress/atom NULL virial",
             "compute esum all reduce sum c_peatom",
             "compute ssum all reduce sum " + " ".join(f"c_satom[{k}]" for k in range(1, 7)),
             f"thermo_style custom step pe vol {virial} c_esum {stress_sum}",
             "thermo_modify format float %.17g",
             "run 0",
             "print \"REF $(pe) $(vol) " + " ".join(f"$(c_virial[{k}])" for k in range(1, 7))
             + " $(c_esum) " + " ".join(f"$(c_ssum[{k}])" for k in range(1, 7)) + "\"",
             # fix numdiff leaves the pair's energy at its last displaced configuration, so it
             # runs after the reference values are taken.
             *[f"fix num{k} all numdiff 1 {delta}" for k, delta in enumerate(deltas_x)],
             "dump d all custom 1 forces.dump id fx fy fz "
             + " ".join(f"f_num{k}[1] f_num{k}[2] f_num{k}[3]" for k in range(len(deltas_x))),
             "dump_modify d format float %.17g sort id",
             "run 0",
             *[f"unfix num{k}" for k in range(len(deltas_x))], "undump d",
             "thermo_style custom step pe", "thermo_modify format float %.17g"]
    for component in COMPONENTS:
        if component[0] != component[1] and not triclinic:
            lines.append("change_box all triclinic")
            triclinic = True
        for step in steps:
            lx, ly, lz, xy, xz, yz = strained_box(box, component, step * delta_strain)
            command = f"change_box all x final 0 {lx!r} y final 0 {ly!r} z final 0 {lz!r}"
            if triclinic:
                command += f" xy final {xy!r} xz final {xz!r} yz final {yz!r}"
            lines += [command + " remap units box", "run 0",
                      f"print \"STRAIN {component} {step} $(pe)\""]
    return "\n".join(lines) + "\n"


def derivative(values, delta, richardson):
    """Central difference from values at +-delta (and +-2 delta with Richardson extrapolation,
    which cancels the delta^2 error: (4 D(delta) - D(2 delta)) / 3)."""
    central = (values[1] - values[-1]) / (2 * delta)
    if not richardson:
        return central
    wide = (values[2] - values[-2]) / (4 * delta)
    return (4 * central - wide) / 3


def check_case(ctx, label, *, cells, tilt, dtype, tolerance, delta_x, delta_strain,
               richardson=False, lattice=5.43, jitter=0.15):
    data, natoms = write_crystal(ctx, f"{label}.data", cells=cells, tilt=tilt, seed=len(label),
                                 lattice=lattice, jitter=jitter)
    spec = write_spec(ctx, f"{label}.json", dtype=dtype)
    box = (cells[0] * lattice, cells[1] * lattice, cells[2] * lattice,
           tilt[0] * lattice, tilt[1] * lattice, tilt[2] * lattice)
    triclinic = any(tilt)
    deltas_x = [delta_x, 2 * delta_x] if richardson else [delta_x]
    steps = (1, -1, 2, -2) if richardson else (1, -1)
    result = run_lammps(ctx, script(ctx, data, spec, box, triclinic, deltas_x, delta_strain,
                                    steps), name=f"in.{label}", np=1)

    # Forces against central differences of the energy (fix numdiff gives -dE/dx).
    rows, _ = read_dump(ctx.workdir / "forces.dump")
    expect(len(rows) == natoms, f"{label}: dump has {len(rows)} atoms, expected {natoms}")
    forces = [v for row in rows.values() for v in row[0:3]]
    numeric = [v for row in rows.values() for v in row[3:6]]
    if richardson:
        wide = [v for row in rows.values() for v in row[6:9]]
        numeric = [(4 * n - w) / 3 for n, w in zip(numeric, wide)]
    expect(max_abs(forces) > 1e-3, f"{label}: forces are all ~0 ({max_abs(forces)}); the test "
                                   "would not see an error")
    force_error = relative_norm_error(forces, numeric)
    print(f"{label}: {natoms} atoms, max |F| {max_abs(forces):.4g}, force vs finite differences "
          f"relative error {force_error:.3g} (largest component "
          f"{relative_error(forces, numeric):.3g} of max |F|; tolerance {tolerance})")
    expect(force_error <= tolerance, f"{label}: forces differ from -dE/dx by {force_error:.3g} "
                                     f"relative (> {tolerance})")

    # Virial against the strain derivative; per-atom sums against the totals.
    reference = read_values(result.log, "REF")[-1]
    energy, volume = reference[0], reference[1]
    virial = [p * volume / NKTV2P_METAL for p in reference[2:8]]
    energy_sum = reference[8]
    stress_sum = reference[9:15]
    strains = {(row[0], row[1]): row[2] for row in
               ([line.split()[1], int(line.split()[2]), float(line.split()[3])]
                for line in result.log.splitlines()
                if line.startswith("STRAIN ") and "$" not in line)}
    expect(len(strains) == 6 * len(steps),
           f"{label}: expected {6 * len(steps)} strained energies, got {len(strains)}")
    strain_virial = [-derivative({k: strains[(c, k)] for k in steps}, delta_strain, richardson)
                     for c in COMPONENTS]
    virial_error = relative_norm_error(virial, strain_virial)
    print(f"{label}: virial {['%.6g' % w for w in virial]}, vs -dE/d(strain) relative error "
          f"{virial_error:.3g} (tolerance {tolerance})")
    expect(virial_error <= tolerance, f"{label}: virial {virial} differs from the strain "
                                      f"derivative {strain_virial} by {virial_error:.3g} relative")

    energy_error = abs(energy_sum - energy) / max(abs(energy), 1e-300)
    expect(energy_error <= 1e-10, f"{label}: sum of per-atom energies {energy_sum!r} != "
                                  f"energy {energy!r} (relative {energy_error:.3g})")
    # compute stress/atom is minus the per-atom virial in pressure x volume units.
    atom_virial = [-s / NKTV2P_METAL for s in stress_sum]
    per_atom_error = relative_error(atom_virial, virial)
    expect(per_atom_error <= 1e-10, f"{label}: sum of per-atom virials {atom_virial} != virial "
                                    f"{virial} (relative {per_atom_error:.3g})")
    print(f"{label}: per-atom sums: energy relative error {energy_error:.3g}, virial "
          f"{per_atom_error:.3g}")


def test(ctx):
    check_case(ctx, "orthogonal-float64", cells=(2, 2, 2), tilt=(0, 0, 0), dtype="float64",
               tolerance=1e-6, delta_x=1e-5, delta_strain=1e-5)
    check_case(ctx, "triclinic-float64", cells=(2, 1, 1), tilt=(0.3, -0.2, 0.25),
               dtype="float64", tolerance=1e-6, delta_x=1e-5, delta_strain=1e-5)
    # Float32 energies carry ~1e-7 eV of rounding per displacement while the untrained model's
    # forces are only a few 0.01 eV/A: plain central differences bottom out near 2e-4 relative
    # (rounding at small steps, the delta^2 term at large ones). Richardson extrapolation from
    # larger steps cancels the delta^2 term, and a compressed crystal raises the forces (to about
    # 0.1 eV/A) above the rounding; then the float32 tolerance is met.
    check_case(ctx, "orthogonal-float32", cells=(2, 2, 2), tilt=(0, 0, 0), dtype="float32",
               tolerance=1e-4, delta_x=4e-2, delta_strain=4e-3, richardson=True, lattice=4.8,
               jitter=0.2)
    check_case(ctx, "triclinic-float32", cells=(2, 1, 1), tilt=(0.3, -0.2, 0.25),
               dtype="float32", tolerance=1e-4, delta_x=4e-2, delta_strain=4e-3, richardson=True,
               lattice=4.8, jitter=0.2)


if __name__ == "__main__":
    main(test)

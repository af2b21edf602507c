"""compute otf/atom: the committee's per-atom energy uncertainty is finite, non-negative and not all
zero for a committee of 4; its maximum through compute reduce (thermo) equals the dump's maximum;
atoms outside the compute's group get 0; it follows the atoms through an MD run (dump every step);
a committee of one has zero uncertainty; using it on a step without a model evaluation is an
error.
"""
import math

from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import plugin_header, read_dump, write_crystal, write_spec


def run(ctx, label, spec, extra=()):
    data = ctx.workdir / "crystal.data"
    dump = ctx.workdir / f"{label}.dump"
    result = run_lammps(ctx, "\n".join([
        plugin_header(ctx), f"read_data {data}",
        f"pair_style otf {spec}", "pair_coeff * * Si C",
        "region low block INF INF INF INF INF 5.0 units box",
        "group low region low",
        "compute u all otf/atom", "compute ulow low otf/atom",
        "compute umax all reduce max c_u", "compute usum all reduce sum c_u",
        "thermo_style custom step pe c_umax c_usum",
        "thermo_modify format float %.17g",
        "thermo 5",
        "velocity all create 600 4 loop geom",
        "fix nve all nve",
        f"dump d all custom 5 {dump} id type z c_u c_ulow",
        "dump_modify d format float %.17g sort id",
        *extra,
        "run 10",
    ]) + "\n", name=f"in.{label}", np=ctx.np)
    return result, dump


def test(ctx):
    write_crystal(ctx, "crystal.data", cells=(2, 2, 2), seed=2)
    result, dump = run(ctx, "committee", write_spec(ctx, "spec.json", committee_size=4))
    atoms, columns = read_dump(dump)
    expect(columns == ["type", "z", "c_u", "c_ulow"], f"unexpected dump columns {columns}")
    values = [atom[2] for atom in atoms.values()]
    expect(all(math.isfinite(v) and v >= 0.0 for v in values),
           f"uncertainties must be finite and >= 0: {values[:8]}...")
    expect(max(values) > 0.0, "a committee of 4 gives all-zero uncertainties")
    thermo_max = result.last("c_umax")
    expect(thermo_max == max(values), f"compute reduce max {thermo_max!r} != dump max "
                                      f"{max(values)!r}")
    expect(abs(result.last("c_usum") - sum(values)) <= 1e-12 * sum(values),
           "compute reduce sum differs from the dump's sum")
    for atom in atoms.values():
        in_group = atom[1] <= 5.0
        expect(atom[3] == (atom[2] if in_group else 0.0),
               f"group-restricted compute gives {atom[3]} for an atom at z {atom[1]} with "
               f"uncertainty {atom[2]}")
    print(f"committee of 4: uncertainty per atom {min(values):.3g}..{max(values):.3g} "
          f"(reduce max {thermo_max:.6g})")

    result, dump = run(ctx, "single", write_spec(ctx, "single.json", committee_size=1))
    values = [atom[2] for atom in read_dump(dump)[0].values()]
    expect(all(v == 0.0 for v in values), f"a committee of one must have zero uncertainty, got "
                                          f"{max(values)}")

    # A step without a model evaluation (pair_modify compute no): a clear error, not stale numbers.
    data = ctx.workdir / "crystal.data"
    result = run_lammps(ctx, "\n".join([
        plugin_header(ctx), f"read_data {data}",
        f"pair_style otf {ctx.workdir / 'spec.json'}", "pair_coeff * * Si C",
        "pair_modify compute no",
        "compute u all otf/atom", "compute umax all reduce max c_u",
        "thermo_style custom step pe c_umax", "run 0"]) + "\n", name="in.stale", check=False)
    expect(result.returncode != 0, "compute otf/atom without a model evaluation must fail")
    expect_in("pair_style otf was not evaluated on step 0", result.stdout + result.log)


if __name__ == "__main__":
    main(test)

"""NVE with pair_style otf conserves energy: crystalline Si at 600 K with an untrained float64 and
float32 model, a few hundred steps of 1 fs; the drift of the total energy (slope of a linear fit)
must stay below 2e-5 eV/atom/ps and its fluctuations below 5e-5 eV/atom. The 10 ps drift report
is a separate measurement (doc/pair_otf.md).
"""
from lammps_harness import expect, main, run_lammps
from pair_otf_common import plugin_header, write_crystal, write_spec

STEPS = 400
TIMESTEP_PS = 0.001
DRIFT_BOUND = 2e-5        # eV/atom/ps
FLUCTUATION_BOUND = 5e-5  # eV/atom


def linear_slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def test(ctx):
    data, natoms = write_crystal(ctx, "si.data", cells=(2, 2, 2), types=1, jitter=0.0)
    for dtype in ("float64", "float32"):
        spec = write_spec(ctx, f"si-{dtype}.json", elements=["Si"], cutoff=4.5, dtype=dtype)
        result = run_lammps(ctx, "\n".join([
            plugin_header(ctx), f"read_data {data}",
            f"pair_style otf {spec}", "pair_coeff * * Si",
            "velocity all create 1200 12345 loop geom",
            f"timestep {TIMESTEP_PS}", "fix nve all nve",
            "thermo_style custom step time temp pe ke etotal",
            "thermo_modify format float %.15g", "thermo 10",
            f"run {STEPS}"]) + "\n", name=f"in.nve-{dtype}")
        time = result.column("Time")
        etotal = result.column("TotEng")
        temp = result.column("Temp")
        slope = linear_slope(time, etotal) / natoms
        fluctuation = (max(etotal) - min(etotal)) / natoms
        print(f"NVE {dtype}: {natoms} atoms, {STEPS} steps of {TIMESTEP_PS * 1000:g} fs, "
              f"T {min(temp):.0f}..{max(temp):.0f} K, drift {slope:.3g} eV/atom/ps, "
              f"max-min of total energy {fluctuation:.3g} eV/atom")
        expect(max(temp) - min(temp) > 10, f"{dtype}: the temperature does not change; the "
                                           "model exerts no forces and the test proves nothing")
        expect(abs(slope) <= DRIFT_BOUND, f"{dtype}: energy drift {slope:.3g} eV/atom/ps "
                                          f"exceeds {DRIFT_BOUND}")
        expect(fluctuation <= FLUCTUATION_BOUND, f"{dtype}: total energy varies by "
                                                 f"{fluctuation:.3g} eV/atom")


if __name__ == "__main__":
    main(test)

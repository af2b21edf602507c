"""reference ipi with a real ab initio code: CP2K (Debian's cp2k, PBE, GTH pseudopotentials, a
MOLOPT basis) started by fix otf/train as an i-PI client labels an 8-atom silicon cell; the label
of step 0 matches a single-point CP2K run of the same geometry (energy, forces and virial, in
LAMMPS metal units). Two DFT calls and one single point: well under two minutes.
"""
import json
import shutil
import subprocess

from ipi_common import read_journal, unique_name
from lammps_harness import expect, fail, main, run_lammps

PYTHON = "/usr/bin/python3"


def test(ctx):
    cp2k = shutil.which("cp2k")
    if cp2k is None:
        fail("cp2k is not installed (scripts/setup.sh installs Debian's cp2k and cp2k-data)")
    example = ctx.source_dir.parent.parent / "examples" / "si-cp2k"
    w = ctx.workdir
    shutil.copy(example / "si8.data", w / "si8.data")
    (w / "si-spec.json").write_text(json.dumps({
        "elements": ["Si"], "cutoff": 4.0, "units": "metal", "committee_size": 2,
        "dtype": "float32", "seed": 1, "hyperparameters": {"hidden": [16, 16]}}))
    make_input = f"{PYTHON} {example / 'make_cp2k_input.py'} si8.data"
    client = (f"{make_input} --mode driver -o driver.inp && OMP_NUM_THREADS=1 exec cp2k "
              f"-i driver.inp")
    script = (f"plugin load {ctx.plugin}\nunits metal\natom_style atomic\natom_modify map array\n"
              f"read_data si8.data\npair_style otf si-spec.json\npair_coeff * * Si\n"
              f"velocity all create 1000 5 mom yes rot yes\nfix nve all nve\ntimestep 0.001\n"
              f"fix dft all otf/train reference ipi unix {unique_name('cp2k')} "
              f"client \"{client}\" client_log cp2k-driver.log "
              f"not_converged \"SCF run NOT converged\" timeout 300 every 1 drive reference "
              f"journal dft.extxyz\n"
              f"thermo_style custom step pe f_dft[9] f_dft[17]\nthermo 1\nrun 1\n")
    result = run_lammps(ctx, script, name="in.cp2k", timeout=300)
    expect(result.last("f_dft[9]") == 2 and result.last("f_dft[17]") == 0,
           "expected 2 DFT calls and no failure")
    frames = read_journal(w / "dft.extxyz")
    expect(len(frames) == 2 and frames[0]["step"] == 0, "journal: 2 labels from step 0")
    label = frames[0]

    subprocess.run(f"{make_input} --mode single-point -o sp.inp", shell=True, cwd=w, check=True)
    subprocess.run(["cp2k", "-i", "sp.inp", "-o", "sp.out"], cwd=w, check=True,
                   env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}, timeout=300,
                   capture_output=True)
    parsed = subprocess.run([PYTHON, str(example / "parse_cp2k_output.py"), "sp.out", "--data",
                             "si8.data"], cwd=w, check=True, capture_output=True, text=True)
    single = json.loads(parsed.stdout)
    energy_difference = abs(label["energy"] - single["energy_ev"]) / abs(single["energy_ev"])
    force_difference = max(abs(a - b) for row_a, row_b in zip(label["forces"],
                                                               single["forces_ev_a"])
                           for a, b in zip(row_a, row_b))
    virial_single = [x for row in single["virial_ev"] for x in row]
    virial_difference = max(abs(a - b) for a, b in zip(label["virial"], virial_single))
    print(f"CP2K label vs single point: energy {label['energy']:.8f} eV (relative difference "
          f"{energy_difference:.2g}), forces max |diff| {force_difference:.2g} eV/A, virial "
          f"max |diff| {virial_difference:.2g} eV of {max(abs(v) for v in virial_single):.3g}")
    expect(energy_difference <= 1e-7, "energy differs")
    expect(force_difference <= 1e-4, "forces differ")
    expect(virial_difference <= 1e-3, "virial differs")
    expect(max(abs(x) for row in label["forces"] for x in row) > 0.05, "forces are all ~0")


if __name__ == "__main__":
    main(test)

#!/usr/bin/python3
"""Read energy, forces and stress from a CP2K 2023.1 ENERGY_FORCE output; print JSON in eV units.

  /usr/bin/python3 parse_cp2k_output.py si8-sp.out [--data si8.data]

Output JSON: energy_ev, forces_ev_a (one row per atom, in CP2K's atom order = LAMMPS id order
when the input came from make_cp2k_input.py), stress_gpa (as CP2K prints it), volume_a3,
virial_ev (LAMMPS convention) and pressure_gpa, plus the raw atomic-unit values.

CP2K output lines used (CP2K 2023.1, PRINT_LEVEL LOW, &FORCE_EVAL &PRINT &FORCES ON and
&STRESS_TENSOR ON; CP2K appends to an existing -o file, so the LAST block of each kind is used):

 ENERGY| Total FORCE_EVAL ( QS ) energy [a.u.]:              -31.114488533554219
 ATOMIC FORCES in [a.u.]
 # Atom   Kind   Element          X              Y              Z
      1      1      Si          0.00651151     0.00045664    -0.00492598
      ...
 SUM OF ATOMIC FORCES          -0.00000089     0.00000068     0.00000072     0.00000133
 STRESS| Analytical stress tensor [GPa]
 STRESS|                        x                   y                   z
 STRESS|      x        1.05252413286E+01   2.17830161623E-01   1.84869478573E-01
 STRESS|      y        2.17830161623E-01   1.03699893411E+01  -3.55920357266E-01
 STRESS|      z        1.84869478573E-01  -3.55920357266E-01   1.03432639010E+01
 STRESS| 1/3 Trace                                             1.04128315236E+01
 CELL| Volume [angstrom^3]:                                            160.191
 (from &SUBSYS &PRINT &CELL ON; printed with 3 decimals only: give --data for the exact one)

Sign conventions (checked with numbers on si8.data, CP2K 2023.1): CP2K's printed "stress
tensor" is the pressure tensor, sigma = -(1/V) dE/d(strain): positive diagonal = compressed
(+10.41 GPa here). A +-0.2 % isotropic strain gave -dE/dV = 3.5397e-4 Hartree/Bohr^3 and the
i-PI driver's trace(virial)/(3V) = 3.5395e-4. LAMMPS' virial W = sum_i r_i f_i (energy units)
is positive for a compressed cell, P = (N k T + trace(W)/3) / V, so W = +stress * V, which is
also what CP2K's i-PI driver returns as "virial" (Hartree): max difference 1.5e-6 eV of 10.5 eV.

Forces are printed with 8 decimals in Hartree/Bohr (resolution 4e-7 eV/A). Energies are
Hartree and converted with CODATA 2018 (CP2K itself uses CODATA 2006 internally, which differs
by 9e-8 relative in the Hartree-to-eV factor; that does not matter for Hartree values).
"""

import argparse
import json
import os
import re
import sys

BOHR_ANGSTROM = 0.529177210903  # CODATA 2018
HARTREE_EV = 27.211386245988  # CODATA 2018
# CP2K 2023.1 converts with CODATA 2006 (its PHYSCON print): 1 Hartree/Bohr^3 = 29421.0107994716
# GPa, 1 Bohr = 0.52917720859 A. The stress is taken back to atomic units with CP2K's own factors,
# giving the virial in Hartree exactly as CP2K's i-PI driver returns it, then to eV with 2018.
CP2K_GPA_PER_AU = 29421.0107994716
CP2K_BOHR_ANGSTROM = 0.52917720859

ENERGY_RE = re.compile(r"^ ENERGY\| Total FORCE_EVAL \( \w+ \) energy \[a\.u\.\]:\s+(\S+)")
VOLUME_RE = re.compile(r"^ CELL\| Volume \[angstrom\^3\]:\s+(\S+)")


def parse(path):
    with open(path) as handle:
        lines = handle.read().splitlines()
    energy = None
    forces = None
    stress = None
    volume = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = ENERGY_RE.match(line)
        if m:
            energy = float(m.group(1))
        m = VOLUME_RE.match(line)
        if m:
            volume = float(m.group(1))
        if line.startswith(" ATOMIC FORCES in [a.u.]"):
            rows = []
            j = i + 1
            while j < len(lines) and not lines[j].startswith(" SUM OF ATOMIC FORCES"):
                words = lines[j].split()
                if words and words[0] != "#":  # skip "# Atom Kind Element X Y Z"
                    if int(words[0]) != len(rows) + 1:
                        raise ValueError("%s:%d: unexpected force line %r"
                                         % (path, j + 1, lines[j]))
                    rows.append([float(w) for w in words[3:6]])
                j += 1
            forces = rows
            i = j
        if line.startswith(" STRESS| Analytical stress tensor [GPa]") or \
                line.startswith(" STRESS| Numerical stress tensor [GPa]"):
            rows = []
            for k in range(3):
                words = lines[i + 2 + k].split()
                if words[:2] != ["STRESS|", "xyz"[k]]:
                    raise ValueError("%s:%d: unexpected stress line %r" % (path, i + 3 + k,
                                                                        lines[i + 2 + k]))
                rows.append([float(w) for w in words[2:5]])
            stress = rows
            i += 4
        i += 1
    if energy is None:
        raise ValueError("%s: no 'ENERGY| Total FORCE_EVAL' line" % path)
    return energy, forces, stress, volume


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="CP2K output file (cp2k -o)")
    parser.add_argument("--data", help="LAMMPS data file the input came from (exact volume)")
    args = parser.parse_args(argv)

    energy, forces, stress, volume = parse(args.output)
    if args.data:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from make_cp2k_input import read_lammps_data
        volume = read_lammps_data(args.data).volume()
    result = {
        "energy_hartree": energy,
        "energy_ev": energy * HARTREE_EV,
        "natoms": len(forces) if forces is not None else None,
        "forces_hartree_bohr": forces,
        "forces_ev_a": None if forces is None else
        [[f * HARTREE_EV / BOHR_ANGSTROM for f in row] for row in forces],
        "stress_gpa": stress,
        "volume_a3": volume,
    }
    if stress is not None and volume is not None:
        # LAMMPS virial (energy units): W = +stress * V (CP2K's stress is a pressure tensor).
        volume_bohr3 = volume / CP2K_BOHR_ANGSTROM ** 3
        virial = [[s / CP2K_GPA_PER_AU * volume_bohr3 * HARTREE_EV for s in row]
                  for row in stress]
        result["virial_ev"] = virial
        result["virial_voigt_ev"] = [virial[0][0], virial[1][1], virial[2][2],
                                     virial[0][1], virial[0][2], virial[1][2]]
        result["pressure_gpa"] = (stress[0][0] + stress[1][1] + stress[2][2]) / 3.0
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

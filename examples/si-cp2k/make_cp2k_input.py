#!/usr/bin/python3
"""Write a CP2K input for silicon from a LAMMPS data file (atom_style atomic).

Two modes share the same DFT settings:

  driver        RUN_TYPE DRIVER: CP2K becomes an i-PI client of `fix otf/train` (the i-PI
                server). CP2K takes the cell and the positions from every POSDATA message; the
                geometry written here only fixes the number, order and kinds of the atoms.
  single-point  RUN_TYPE ENERGY_FORCE: one energy + forces + stress calculation of the geometry
                in the data file, printing the forces and the stress tensor (read them with
                parse_cp2k_output.py).

Atoms are written in the order of their LAMMPS atom ids, whatever the order of the lines in the
data file: the i-PI server sends positions ordered by atom id and CP2K assumes its own atom order.

Usage (Debian's /usr/bin/python3; standard library only):

  /usr/bin/python3 make_cp2k_input.py si8.data --mode single-point -o si8-sp.inp
  /usr/bin/python3 make_cp2k_input.py si8.data --mode driver --socket otf_si -o si8-driver.inp
  /usr/bin/python3 make_cp2k_input.py si8.data --mode driver --inet --host 127.0.0.1 \
      --port 31415 -o si8-driver.inp
  OMP_NUM_THREADS=1 cp2k -i si8-sp.inp -o si8-sp.out     # cp2k -o APPENDS to an existing file

In driver mode without --socket/--inet the address comes from OTF_IPI_MODE, OTF_IPI_HOST,
OTF_IPI_PORT, OTF_IPI_UNIX_PATH (set by `fix otf/train ... client`), e.g. the client command
  /usr/bin/python3 examples/si-cp2k/make_cp2k_input.py si64.data --mode driver -o drv.inp &&
  OMP_NUM_THREADS=1 exec cp2k -i drv.inp
(without -o CP2K writes to stdout, i.e. the fix's client_log, including its
"*** WARNING in qs_scf.F:601 :: SCF run NOT converged ***" lines: CP2K 2023.1 has no other way
to tell the server that an SCF did not converge; it returns the unconverged forces as usual.)

The data file must use Angstrom for lengths (LAMMPS units metal or real). Every atom type is Si
unless --elements says otherwise (Si and C have basis/pseudopotential settings here).
"""

import argparse
import os
import re
import sys

# Basis set and pseudopotential files of Debian's cp2k-data package (2023.1).
DATA_DIR = "/usr/share/cp2k"
BASIS_FILE = os.path.join(DATA_DIR, "BASIS_MOLOPT")
POTENTIAL_FILE = os.path.join(DATA_DIR, "GTH_POTENTIALS")

# Per element: (basis set name in BASIS_MOLOPT, GTH pseudopotential name in GTH_POTENTIALS).
KINDS = {
    "Si": ("DZVP-MOLOPT-SR-GTH", "GTH-PBE-q4"),
    "C": ("DZVP-MOLOPT-SR-GTH", "GTH-PBE-q4"),
}

SECTION_NAMES = {
    "Atoms", "Velocities", "Masses", "Ellipsoids", "Lines", "Triangles", "Bodies",
    "Bonds", "Angles", "Dihedrals", "Impropers",
    "Pair Coeffs", "PairIJ Coeffs", "Bond Coeffs", "Angle Coeffs", "Dihedral Coeffs",
    "Improper Coeffs", "BondBond Coeffs", "BondAngle Coeffs", "MiddleBondTorsion Coeffs",
    "EndBondTorsion Coeffs", "AngleTorsion Coeffs", "AngleAngleTorsion Coeffs",
    "BondBond13 Coeffs", "AngleAngle Coeffs",
}


class LammpsData:
    """The parts of a LAMMPS data file that an atomic-style DFT input needs (lengths as written)."""

    def __init__(self):
        self.natoms = 0
        self.ntypes = 0
        self.lo = [0.0, 0.0, 0.0]
        self.hi = [0.0, 0.0, 0.0]
        self.tilt = [0.0, 0.0, 0.0]  # xy xz yz
        self.masses = {}  # type -> mass
        self.atoms = []  # (id, type, x, y, z), sorted by id

    def cell_vectors(self):
        """LAMMPS' edge vectors a = (lx,0,0), b = (xy,ly,0), c = (xz,yz,lz), as rows."""
        lx, ly, lz = (self.hi[k] - self.lo[k] for k in range(3))
        xy, xz, yz = self.tilt
        return [[lx, 0.0, 0.0], [xy, ly, 0.0], [xz, yz, lz]]

    def volume(self):
        return ((self.hi[0] - self.lo[0]) * (self.hi[1] - self.lo[1])
                * (self.hi[2] - self.lo[2]))


def _is_number(token):
    try:
        float(token)
        return True
    except ValueError:
        return False


def read_lammps_data(path):
    """Reads a LAMMPS data file with an atomic-style Atoms section (id type x y z [ix iy iz])."""
    data = LammpsData()
    with open(path) as handle:
        lines = handle.read().splitlines()[1:]  # the first line is a title
    i = 0
    section = None
    style_hint = None
    atoms = []
    while i < len(lines):
        raw = lines[i]
        i += 1
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        if section is None and not text.split()[0].isalpha():
            # Header line: a count or a box extent.
            words = text.split()
            if words[-1] == "atoms" and len(words) == 2:
                data.natoms = int(words[0])
            elif words[-2:] == ["atom", "types"]:
                data.ntypes = int(words[0])
            elif words[-2:] in (["xlo", "xhi"], ["ylo", "yhi"], ["zlo", "zhi"]):
                k = "xyz".index(words[-2][0])
                data.lo[k], data.hi[k] = float(words[0]), float(words[1])
            elif words[-3:] == ["xy", "xz", "yz"]:
                data.tilt = [float(w) for w in words[:3]]
            continue
        if text in SECTION_NAMES:
            section = text
            if section == "Atoms" and "#" in raw:
                hint = raw.split("#", 1)[1].split()
                style_hint = hint[0] if hint else None
            continue
        if text.split()[0].isalpha():
            raise ValueError("%s: unknown section or header line: %r" % (path, raw))
        words = text.split()
        if section == "Masses":
            data.masses[int(words[0])] = float(words[1])
        elif section == "Atoms":
            if style_hint not in (None, "atomic"):
                raise ValueError("%s: Atoms section is '%s', only 'atomic' is supported"
                                 % (path, style_hint))
            if len(words) not in (5, 8) or not all(_is_number(w) for w in words):
                raise ValueError("%s: not an atomic-style Atoms line "
                                 "(id type x y z [ix iy iz]): %r" % (path, raw))
            atoms.append((int(words[0]), int(words[1]),
                          float(words[2]), float(words[3]), float(words[4])))
    atoms.sort(key=lambda a: a[0])
    ids = [a[0] for a in atoms]
    if len(atoms) != data.natoms:
        raise ValueError("%s: header says %d atoms, Atoms section has %d"
                         % (path, data.natoms, len(atoms)))
    if len(set(ids)) != len(ids):
        raise ValueError("%s: duplicate atom ids" % path)
    data.atoms = atoms
    return data


def element_of_types(data, elements):
    """Maps atom type -> element symbol from a list given per type (or one symbol for all)."""
    if len(elements) == 1:
        return {t: elements[0] for t in range(1, data.ntypes + 1)}
    if len(elements) != data.ntypes:
        raise ValueError("--elements needs one symbol or %d (one per atom type)" % data.ntypes)
    return {t + 1: e for t, e in enumerate(elements)}


def cp2k_input(data, mode, elements, project, socket=None, inet=False, host="127.0.0.1",
               port=31415, cutoff=200.0, rel_cutoff=40.0, eps_scf=1.0e-6, max_scf=50,
               outer_max_scf=10, scf="diag", smearing_k=300.0, stress=True, kpoints=1,
               basis=None):
    type_element = element_of_types(data, elements)
    for element in set(type_element.values()):
        if element not in KINDS:
            raise ValueError("no basis set / pseudopotential settings for element %s" % element)
    a, b, c = data.cell_vectors()
    out = []
    w = out.append
    w("# CP2K 2023.1 input written by make_cp2k_input.py (mode %s)" % mode)
    w("# %d atoms listed in the order of their LAMMPS atom ids (%d..%d)"
      % (len(data.atoms), data.atoms[0][0], data.atoms[-1][0]))
    w("&GLOBAL")
    w("  PROJECT %s" % project)
    w("  RUN_TYPE %s" % ("DRIVER" if mode == "driver" else "ENERGY_FORCE"))
    w("  PRINT_LEVEL LOW")
    w("&END GLOBAL")
    if mode == "driver":
        w("&MOTION")
        w("  # i-PI client. UNIX: CP2K connects to the socket file /tmp/ipi_<HOST>, which the")
        w("  # server must already have created (CP2K stops if nobody listens).")
        w("  &DRIVER")
        if inet:
            w("    HOST %s" % host)
            w("    PORT %d" % port)
        else:
            w("    HOST %s" % socket)
            w("    UNIX")
        w("  &END DRIVER")
        w("&END MOTION")
    w("&FORCE_EVAL")
    w("  METHOD QS")
    if stress:
        w("  STRESS_TENSOR ANALYTICAL")
    else:
        w("  # No stress: about 1 s less per 8-atom call; the driver then returns a ZERO virial.")
        w("  STRESS_TENSOR NONE")
    w("  &DFT")
    w("    BASIS_SET_FILE_NAME %s" % BASIS_FILE)
    w("    POTENTIAL_FILE_NAME %s" % POTENTIAL_FILE)
    w("    # Driver mode: the server's cell replaces the one below at every call (checked: a 2%")
    w("    # larger cell gave the single-point energy of that cell to 2E-9 Hartree).")
    w("    &MGRID")
    w("      CUTOFF %g" % cutoff)
    w("      REL_CUTOFF %g" % rel_cutoff)
    w("    &END MGRID")
    w("    &QS")
    w("      EPS_DEFAULT 1.0E-10  # CP2K default; 1E-12 changed E by 2.5E-6 Ha, F by 2E-5 eV/A")
    if mode == "driver" and kpoints > 1:
        # CP2K 2023.1 aborts (CPASSERT in qs_wf_history_methods.F) when it extrapolates k-point
        # wavefunctions in driver mode: every call starts from the atomic guess.
        w("      EXTRAPOLATION USE_GUESS")
    elif mode == "driver":
        w("      # Reference calls come at irregular intervals, not every MD step: start each SCF")
        w("      # from the previous wavefunction rather than extrapolating a time series.")
        w("      EXTRAPOLATION USE_PREV_WF")
    w("    &END QS")
    w("    &SCF")
    w("      SCF_GUESS ATOMIC")
    w("      EPS_SCF %g" % eps_scf)
    w("      MAX_SCF %d" % max_scf)
    if scf == "ot":
        # Orbital transformation (fixed integer occupations): cheapest per step for hundreds
        # of atoms of an insulator, but slow here: the 8-atom cell (Gamma-point gap 0.6 eV)
        # needed 61-73 steps (45-68 s) where diagonalisation needed 12 (15 s), and a sheared
        # cell whose gap closed needed 124 steps.
        w("      &OT")
        w("        MINIMIZER DIIS")
        w("        PRECONDITIONER FULL_SINGLE_INVERSE")
        w("      &END OT")
        w("      &OUTER_SCF")
        w("        EPS_SCF %g" % eps_scf)
        w("        MAX_SCF %d" % outer_max_scf)
        w("      &END OUTER_SCF")
    else:
        # Diagonalisation with Broyden density mixing: fastest for 8-64 atoms of Si. Without
        # smearing it oscillated forever on a sheared 8-atom cell whose Gamma-point gap closed
        # (occupations flipping between states); Fermi-Dirac smearing at a low electronic
        # temperature converges both that cell (18 steps) and the plain one (12 steps; energy
        # 2E-6 Hartree from the unsmeared one). Energies are then Mermin free energies and the
        # forces are their exact derivatives.
        w("      ADDED_MOS %d" % max(8, len(data.atoms)))
        w("      &DIAGONALIZATION")
        w("        ALGORITHM STANDARD")
        w("      &END DIAGONALIZATION")
        w("      &MIXING")
        w("        METHOD BROYDEN_MIXING")
        w("        ALPHA 0.3")
        w("      &END MIXING")
        if smearing_k:
            w("      &SMEAR ON")
            w("        METHOD FERMI_DIRAC")
            w("        ELECTRONIC_TEMPERATURE [K] %g" % smearing_k)
            w("      &END SMEAR")
    w("    &END SCF")
    w("    &XC")
    w("      &XC_FUNCTIONAL PBE")
    w("      &END XC_FUNCTIONAL")
    w("    &END XC")
    if kpoints > 1:
        # The 8-atom cell at the Gamma point alone is far from bulk silicon (+10 GPa, and MD at
        # 800 K runs away from diamond); an N x N x N mesh is the same as the Gamma point of an
        # N x N x N supercell, at a fraction of its cost.
        w("    &KPOINTS")
        w("      SCHEME MONKHORST-PACK %d %d %d" % (kpoints, kpoints, kpoints))
        w("      FULL_GRID .FALSE.")
        w("      SYMMETRY .FALSE.")
        w("    &END KPOINTS")
    else:
        w("    # No &KPOINTS: CP2K samples the Brillouin zone at the Gamma point only. That is what")
        w("    # makes a call fast. It is a rough approximation for the 8-atom cubic cell; the Gamma")
        w("    # point of a 64-atom (2x2x2) supercell equals a 2x2x2 k-mesh of the 8-atom cell.")
    w("  &END DFT")
    w("  &SUBSYS")
    w("    &CELL")
    w("      # LAMMPS box edge vectors, Angstrom")
    for name, vec in (("A", a), ("B", b), ("C", c)):
        w("      %s %.10f %.10f %.10f" % (name, vec[0], vec[1], vec[2]))
    w("      PERIODIC XYZ")
    w("    &END CELL")
    w("    &COORD")
    w("      # Angstrom, by LAMMPS atom id")
    for atom_id, atom_type, x, y, z in data.atoms:
        w("      %-2s %.10f %.10f %.10f" % (type_element[atom_type], x, y, z))
    w("    &END COORD")
    for element in sorted(set(type_element.values())):
        kind_basis, potential = KINDS[element]
        kind_basis = basis or kind_basis
        w("    &KIND %s" % element)
        w("      ELEMENT %s" % element)
        w("      BASIS_SET %s" % kind_basis)
        w("      POTENTIAL %s" % potential)
        w("    &END KIND")
    if mode == "single-point":
        w("    &PRINT")
        w("      &CELL ON")
        w("      &END CELL")
        w("    &END PRINT")
    w("  &END SUBSYS")
    if mode == "single-point":
        w("  &PRINT")
        w("    &FORCES ON")
        w("    &END FORCES")
        if stress:
            w("    &STRESS_TENSOR ON")
            w("    &END STRESS_TENSOR")
        w("  &END PRINT")
    w("&END FORCE_EVAL")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="LAMMPS data file, atom_style atomic, lengths in Angstrom")
    parser.add_argument("--mode", choices=("driver", "single-point"), required=True)
    parser.add_argument("-o", "--output", help="input file to write (default: stdout)")
    parser.add_argument("--project", default=None, help="CP2K PROJECT name (default: data stem)")
    parser.add_argument("--elements", nargs="+", default=["Si"],
                        help="element of each atom type, or one for all (default Si)")
    parser.add_argument("--socket", default=None,
                        help="driver mode, UNIX socket: CP2K connects to /tmp/ipi_<SOCKET> "
                        "(default: from OTF_IPI_* as fix otf/train sets them, else otf_si)")
    parser.add_argument("--inet", action="store_true", help="driver mode: TCP instead of UNIX")
    parser.add_argument("--host", default=None, help="driver mode with --inet (127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="driver mode with --inet (31415)")
    parser.add_argument("--cutoff", type=float, default=200.0, help="MGRID CUTOFF, Ry")
    parser.add_argument("--rel-cutoff", type=float, default=40.0, help="MGRID REL_CUTOFF, Ry")
    parser.add_argument("--eps-scf", type=float, default=1.0e-6)
    parser.add_argument("--basis", default=None,
                        help="basis set of every element, a name in BASIS_MOLOPT (default: "
                        "DZVP-MOLOPT-SR-GTH; e.g. TZV2P-MOLOPT-GTH to check a setting)")
    parser.add_argument("--max-scf", type=int, default=50, help="SCF steps (OT: inner loop)")
    parser.add_argument("--outer-max-scf", type=int, default=10, help="outer SCF loops (OT)")
    parser.add_argument("--scf", choices=("diag", "ot"), default="diag",
                        help="diagonalisation + Broyden mixing (default) or orbital transformation")
    parser.add_argument("--kpoints", type=int, default=1, metavar="N",
                        help="N x N x N Monkhorst-Pack mesh (default 1: Gamma point only; needs "
                        "--scf diag)")
    parser.add_argument("--no-stress", action="store_true",
                        help="STRESS_TENSOR NONE (the driver then returns a zero virial)")
    parser.add_argument("--smearing", type=float, metavar="KELVIN", default=300.0,
                        help="--scf diag: Fermi-Dirac electronic temperature (default 300 K; "
                        "0 = integer occupations; use about the ionic temperature for liquid Si)")
    args = parser.parse_args(argv)
    if args.scf == "ot":
        args.smearing = None  # OT has integer occupations
    if args.mode == "driver" and args.socket is None and not args.inet and args.host is None \
            and args.port is None:
        # Started by fix otf/train ("client" keyword): the address is in the environment.
        mode = os.environ.get("OTF_IPI_MODE")
        if mode == "inet":
            args.inet = True
            args.host = os.environ.get("OTF_IPI_HOST") or None
            args.port = int(os.environ["OTF_IPI_PORT"])
        elif mode == "unix":
            args.socket = os.environ.get("OTF_IPI_HOST") or None
            path = os.environ.get("OTF_IPI_UNIX_PATH", "")
            if args.socket is None and path.startswith("/tmp/ipi_"):
                args.socket = path[len("/tmp/ipi_"):]
    if args.socket is None:
        args.socket = "otf_si"
    if args.host is None:
        args.host = "127.0.0.1"
    if args.port is None:
        args.port = 31415

    try:
        data = read_lammps_data(args.data)
    except (OSError, ValueError) as err:
        sys.exit("make_cp2k_input.py: %s" % err)
    project = args.project or re.sub(r"\W", "_", os.path.splitext(os.path.basename(args.data))[0])
    text = cp2k_input(data, args.mode, args.elements, project, socket=args.socket,
                      inet=args.inet, host=args.host, port=args.port, cutoff=args.cutoff,
                      rel_cutoff=args.rel_cutoff, eps_scf=args.eps_scf, max_scf=args.max_scf,
                      outer_max_scf=args.outer_max_scf, scf=args.scf,
                      smearing_k=args.smearing, stress=not args.no_stress, kpoints=args.kpoints,
                      basis=args.basis)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""i-PI client around ASE's EMT calculator: a cheap stand-in for a DFT code behind
`fix otf/train ... reference ipi`.

  /usr/bin/python3 ase_emt_client.py cu108.data --unix otf_cu        # /tmp/ipi_otf_cu
  /usr/bin/python3 ase_emt_client.py cu108.data --inet 127.0.0.1 --port 31415
  /usr/bin/python3 ase_emt_client.py cu108.data     # address from OTF_IPI_MODE (unix|inet),
                                                    # OTF_IPI_HOST, OTF_IPI_PORT, OTF_IPI_UNIX_PATH

Runs until the server sends EXIT (or closes the connection), then exits with status 0.

The LAMMPS data file (atom_style atomic, units metal) gives the number of atoms, their order and
their elements (--element, one per atom type; default Cu). Atoms are sorted by atom id, the
order in which the i-PI server sends them. ASE 3.22's lammps-data reader keeps the order of the
lines unless sort_by_id=True, and without Z_of_type it makes type 1 hydrogen: both are set here.
EMT knows Al, Cu, Ag, Au, Ni, Pd, Pt (and, roughly, H, C, N, O).

Needs Debian's /usr/bin/python3 with python3-ase (ASE 3.22). ASE converts with ITS units
(CODATA 2014: Bohr 0.5291772105638411 A, Hartree 27.211386024367243 eV), so a server using
CODATA 2018 sees energies 8.1e-9 relative larger than EMT's own. It answers NEEDINIT to the
STATUS after every GETFORCE (the server must send INIT before the next POSDATA), returns the
virial as -V * stress (LAMMPS' sign: positive when compressed) and a one-byte extra string (NUL).
"""

import argparse
import os
import sys
import time

from ase.calculators.emt import EMT
from ase.calculators.socketio import SocketClient
from ase.data import atomic_numbers
from ase.io import read

UNIX_PREFIX = "/tmp/ipi_"


def address_from_environment():
    mode = os.environ.get("OTF_IPI_MODE")
    if not mode:
        return None
    if mode == "unix":
        name = os.environ.get("OTF_IPI_HOST", "")
        path = os.environ.get("OTF_IPI_UNIX_PATH", "")
        if not name and path.startswith(UNIX_PREFIX):
            name = path[len(UNIX_PREFIX):]
        if not name:
            raise SystemExit("OTF_IPI_MODE=unix needs OTF_IPI_HOST (the name) or "
                             "OTF_IPI_UNIX_PATH=/tmp/ipi_<name>")
        return ("unix", name, None)
    if mode == "inet":
        port = os.environ.get("OTF_IPI_PORT")
        if not port:
            raise SystemExit("OTF_IPI_MODE=inet needs OTF_IPI_PORT")
        return ("inet", os.environ.get("OTF_IPI_HOST") or "127.0.0.1", int(port))
    raise SystemExit("OTF_IPI_MODE must be unix or inet, not %r" % mode)


def read_atoms(path, elements):
    z_of_type = {}
    for t, symbol in enumerate(elements, start=1):
        if symbol not in atomic_numbers:
            raise SystemExit("unknown element %r" % symbol)
        z_of_type[t] = atomic_numbers[symbol]
    if len(elements) == 1:  # one element for every type
        z_of_type = _AllTypes(z_of_type[1])
    atoms = read(path, format="lammps-data", style="atomic", sort_by_id=True,
                 Z_of_type=z_of_type, units="metal")
    atoms.pbc = True
    return atoms


class _AllTypes(dict):
    def __init__(self, z):
        super().__init__()
        self.z = z

    def __getitem__(self, key):
        return self.z


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="LAMMPS data file (atom_style atomic, units metal)")
    parser.add_argument("--element", nargs="+", default=["Cu"],
                        help="element of each atom type, or one for all (default Cu)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--unix", metavar="NAME", help="UNIX socket /tmp/ipi_<NAME>")
    group.add_argument("--inet", metavar="HOST", help="TCP host (with --port)")
    parser.add_argument("--port", type=int, help="TCP port (with --inet; default 31415)")
    parser.add_argument("--no-stress", action="store_true", help="send a zero virial")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds to wait for a server message (default: forever)")
    parser.add_argument("--log", help="write ASE's protocol log to this file")
    parser.add_argument("--wait", type=float, default=60.0,
                        help="seconds to keep retrying while nobody listens yet (default 60)")
    args = parser.parse_args(argv)

    if args.unix:
        address = ("unix", args.unix, None)
    elif args.inet or args.port:
        address = ("inet", args.inet or "127.0.0.1", args.port or 31415)
    else:
        address = address_from_environment()
        if address is None:
            parser.error("give --unix NAME or --inet HOST --port PORT, or set OTF_IPI_MODE")

    atoms = read_atoms(args.data, args.element)
    atoms.calc = EMT()
    log = open(args.log, "w") if args.log else None
    def connect():
        if address[0] == "unix":
            return SocketClient(unixsocket=address[1], timeout=args.timeout, log=log)
        return SocketClient(host=address[1], port=address[2], timeout=args.timeout, log=log)

    where = UNIX_PREFIX + address[1] if address[0] == "unix" else "%s:%d" % address[1:]
    deadline = time.monotonic() + args.wait
    while True:
        try:
            client = connect()
            break
        except (FileNotFoundError, ConnectionRefusedError) as err:
            if time.monotonic() >= deadline:
                sys.stderr.write("ase_emt_client: nobody listens on %s (%s)\n" % (where, err))
                return 1
            time.sleep(0.5)
    calls = 0
    for _ in client.irun(atoms, use_stress=not args.no_stress):
        calls += 1
    sys.stderr.write("ase_emt_client: %d calls (%d atoms, %s) on %s; the server sent EXIT "
                     "or closed\n" % (calls, len(atoms), atoms.get_chemical_formula(), where))
    return 0


if __name__ == "__main__":
    sys.exit(main())

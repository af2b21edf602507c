#!/usr/bin/python3
"""A minimal i-PI server, for checking i-PI clients (CP2K, ase_emt_client.py) by hand.

Not part of OTF-Torch: `fix otf/train` is the real server. This one listens on a UNIX socket
/tmp/ipi_<NAME> (or a TCP port), optionally starts the client itself, sends the configuration of
a LAMMPS data file (atoms ordered by id) one or more times, receives energy, forces and virial,
sends EXIT and prints JSON: the messages seen, the answers in eV, eV/Angstrom and eV, the
per-call wall times and how the client ended.

  /usr/bin/python3 check_ipi_server.py serve si8.data --socket chk_si \
      --launch "cp2k -i si8-driver.inp -o si8-driver.out" --calls 3 --displace 0.02
  /usr/bin/python3 check_ipi_server.py make-data si8 si8.data     # regenerate the test data
  /usr/bin/python3 check_ipi_server.py make-data cu108 ../cu-ase/cu108.data

i-PI wire format (all native-endian; every header is 12 ASCII bytes, blank padded):
  server STATUS            -> client READY | NEEDINIT | HAVEDATA
  server INIT, int32 bead, int32 n, n bytes              (only after NEEDINIT)
  server POSDATA, 9 f64 cell h, 9 f64 h^-1, int32 nat, 3*nat f64 positions   (Bohr)
        h is sent row-major with the cell vectors as its COLUMNS (a_x b_x c_x a_y ...).
  server GETFORCE          -> client FORCEREADY, f64 energy (Hartree), int32 nat,
        3*nat f64 forces (Hartree/Bohr), 9 f64 virial (Hartree), int32 n, n bytes "extra"
  server EXIT
"""

import argparse
import json
import os
import random
import shlex
import socket
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_cp2k_input import read_lammps_data  # noqa: E402  (same folder)

# CODATA 2018 (what OTF-Torch's server uses); --codata 2014 switches to ASE 3.22's values.
CODATA = {
    "2018": (0.529177210903, 27.211386245988),
    # ase.units of ASE 3.22 (CODATA 2014, derived from mu0, c, h, e, m_e as ASE does it)
    "2014": (0.5291772105638411, 27.211386024367243),
}
BOHR_ANGSTROM, HARTREE_EV = CODATA["2018"]
HDRLEN = 12


def _hdr(text):
    return text.encode("ascii").ljust(HDRLEN)


class Connection:
    def __init__(self, sock):
        self.sock = sock
        self.log = []  # ("send"|"recv", header)

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("client closed the connection after %d of %d bytes"
                                      % (len(buf), n))
            buf.extend(chunk)
        return bytes(buf)

    def send_header(self, text):
        self.log.append(("send", text))
        self.sock.sendall(_hdr(text))

    def recv_header(self):
        text = self.recv_exact(HDRLEN).decode("ascii", "replace").strip()
        self.log.append(("recv", text))
        return text

    def recv_array(self, count, fmt):
        dtype = np.dtype(fmt)
        return np.frombuffer(self.recv_exact(count * dtype.itemsize), dtype=dtype).copy()


def cell_matrix_bohr(data):
    """h with the LAMMPS edge vectors as columns, Bohr."""
    rows = np.array(data.cell_vectors(), dtype=float)  # vectors as rows
    return rows.T / BOHR_ANGSTROM


def ipi_call(conn, h, positions_bohr, init_string=b""):
    """One configuration: STATUS/(INIT)/POSDATA/STATUS/GETFORCE. Returns a dict (atomic units)."""
    t0 = time.monotonic()
    first_status = None
    sent_init = False
    while True:
        conn.send_header("STATUS")
        status = conn.recv_header()
        if first_status is None:
            first_status = status
        if status == "NEEDINIT":
            conn.send_header("INIT")
            conn.sock.sendall(struct.pack("i", 0) + struct.pack("i", len(init_string))
                              + init_string)
            sent_init = True
            continue
        if status == "READY":
            break
        if status == "HAVEDATA":
            raise RuntimeError("client has data it was never asked for")
        raise RuntimeError("unexpected status %r" % status)
    conn.send_header("POSDATA")
    ih = np.linalg.inv(h)
    nat = positions_bohr.shape[0]
    conn.sock.sendall(np.ascontiguousarray(h, dtype="<f8").tobytes()
                      + np.ascontiguousarray(ih, dtype="<f8").tobytes()
                      + struct.pack("i", nat)
                      + np.ascontiguousarray(positions_bohr, dtype="<f8").tobytes())
    t_sent = time.monotonic()
    while True:
        conn.send_header("STATUS")
        status = conn.recv_header()
        if status == "HAVEDATA":
            break
        if status != "READY":  # a client may say READY while still busy; ask again
            raise RuntimeError("unexpected status after POSDATA: %r" % status)
        time.sleep(0.01)
    t_have = time.monotonic()
    conn.send_header("GETFORCE")
    reply = conn.recv_header()
    if reply != "FORCEREADY":
        raise RuntimeError("expected FORCEREADY, got %r" % reply)
    energy = float(conn.recv_array(1, "<f8")[0])
    nat_back = int(conn.recv_array(1, "<i4")[0])
    forces = conn.recv_array(3 * nat_back, "<f8").reshape(nat_back, 3)
    virial = conn.recv_array(9, "<f8").reshape(3, 3)
    nextra = int(conn.recv_array(1, "<i4")[0])
    extra = conn.recv_exact(nextra) if nextra > 0 else b""
    t_done = time.monotonic()
    return {
        "first_status": first_status, "sent_init": sent_init, "nat_returned": nat_back,
        "energy_hartree": energy, "forces_hartree_bohr": forces, "virial_hartree": virial,
        "extra_length": nextra, "extra": extra.decode("utf-8", "replace"),
        "seconds_total": t_done - t0, "seconds_compute": t_have - t_sent,
    }


def to_ev(result, volume_a3):
    out = dict(result)
    out["energy_ev"] = result["energy_hartree"] * HARTREE_EV
    out["forces_ev_a"] = (result["forces_hartree_bohr"] * HARTREE_EV / BOHR_ANGSTROM).tolist()
    vir_ev = result["virial_hartree"] * HARTREE_EV
    out["virial_ev"] = vir_ev.tolist()
    # Pressure from the virial alone (no kinetic part), i-PI/LAMMPS sign: positive = compressed.
    # eV/A^3 -> GPa: 160.2176634
    out["virial_pressure_gpa"] = float(np.trace(vir_ev) / 3.0 / volume_a3 * 160.2176634)
    out["forces_hartree_bohr"] = result["forces_hartree_bohr"].tolist()
    out["positions_a"] = result["positions_a"].tolist()
    out["virial_hartree"] = result["virial_hartree"].tolist()
    return out


def serve(args):
    global BOHR_ANGSTROM, HARTREE_EV
    BOHR_ANGSTROM, HARTREE_EV = CODATA[args.codata]
    data = read_lammps_data(args.data)
    pos0 = np.array([[a[2], a[3], a[4]] for a in data.atoms], dtype=float)  # Angstrom, by id
    h = cell_matrix_bohr(data)
    volume = abs(np.linalg.det(np.array(data.cell_vectors())))

    if args.inet:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((args.host, args.port))
        address = "%s:%d" % (args.host, args.port)
    else:
        path = "/tmp/ipi_" + args.socket
        if os.path.exists(path):
            os.unlink(path)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        address = path
    server.listen(1)
    server.settimeout(args.accept_timeout)

    proc = None
    t_launch = time.monotonic()
    if args.launch:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        proc = subprocess.Popen(shlex.split(args.launch), env=env,
                                stdout=open(args.client_log, "w") if args.client_log else None,
                                stderr=subprocess.STDOUT if args.client_log else None)
    report = {"address": address, "natoms": len(data.atoms), "volume_a3": volume,
              "codata": args.codata}
    try:
        sock, _ = server.accept()
    except socket.timeout:
        report["error"] = "no client connected within %g s" % args.accept_timeout
        if proc:
            proc.kill()
            report["client_returncode"] = proc.wait()
        print(json.dumps(report, indent=1))
        return 1
    report["seconds_until_connect"] = time.monotonic() - t_launch
    sock.settimeout(args.call_timeout)
    conn = Connection(sock)
    rng = random.Random(args.seed)
    calls = []
    try:
        for k in range(args.calls):
            pos = pos0.copy()
            if k > 0 and args.displace > 0:
                pos += np.array([[rng.uniform(-args.displace, args.displace) for _ in range(3)]
                                 for _ in range(len(pos))])
            result = ipi_call(conn, h, pos / BOHR_ANGSTROM, args.init_string.encode())
            result["positions_a"] = pos
            calls.append(to_ev(result, volume))
        conn.send_header("EXIT")
        t_exit = time.monotonic()
        # Does the client close its end?
        sock.settimeout(args.exit_timeout)
        try:
            rest = sock.recv(1)
            report["client_closed_socket"] = (rest == b"")
        except socket.timeout:
            report["client_closed_socket"] = False
        except OSError as err:
            report["client_closed_socket"] = "error: %s" % err
    except Exception as err:  # report what we have
        report["error"] = "%s: %s" % (type(err).__name__, err)
        t_exit = time.monotonic()
    finally:
        sock.close()
        server.close()
        if not args.inet and os.path.exists(address):
            os.unlink(address)
    if proc:
        try:
            report["client_returncode"] = proc.wait(timeout=args.exit_timeout)
            report["seconds_exit"] = time.monotonic() - t_exit
        except subprocess.TimeoutExpired:
            proc.kill()
            report["client_returncode"] = "killed after %g s" % args.exit_timeout
    report["messages"] = conn.log
    report["calls"] = calls
    print(json.dumps(report, indent=1))
    return 0 if "error" not in report else 1


# ---------------------------------------------------------------------------- test data
def write_data(path, title, lattice, basis, reps, mass, jitter, seed):
    rng = random.Random(seed)
    length = lattice * reps
    atoms = []
    for i in range(reps):
        for j in range(reps):
            for k in range(reps):
                for b in basis:
                    x = [(c + off) * lattice for c, off in zip(b, (i, j, k))]
                    x = [(v + rng.uniform(-jitter, jitter)) % length for v in x]
                    atoms.append(x)
    ids = list(range(1, len(atoms) + 1))
    order = ids[:]
    rng.shuffle(order)  # lines out of id order on purpose: readers must sort by id
    with open(path, "w") as out:
        out.write("%s (check_ipi_server.py make-data, seed %d)\n\n" % (title, seed))
        out.write("%d atoms\n1 atom types\n\n" % len(atoms))
        for ax in "xyz":
            out.write("0.0 %.6f %slo %shi\n" % (length, ax, ax))
        out.write("\nMasses\n\n1 %g\n\nAtoms # atomic\n\n" % mass)
        for atom_id in order:
            x = atoms[atom_id - 1]
            out.write("%d 1 %.8f %.8f %.8f\n" % (atom_id, x[0], x[1], x[2]))


def make_data(args):
    fcc = [(0, 0, 0), (0, 0.5, 0.5), (0.5, 0, 0.5), (0.5, 0.5, 0)]
    if args.which == "si8":
        diamond = fcc + [(x + 0.25, y + 0.25, z + 0.25) for x, y, z in fcc]
        write_data(args.path, "Si8 diamond a=5.431 A, uniform jitter +-0.05 A", 5.431,
                   diamond, 1, 28.0855, 0.05, 2026)
    else:
        write_data(args.path, "Cu108 fcc 3x3x3 a=3.61 A, uniform jitter +-0.05 A", 3.61,
                   fcc, 3, 63.546, 0.05, 2026)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve one data file to an i-PI client")
    s.add_argument("data")
    s.add_argument("--socket", default="chk_si", help="UNIX socket /tmp/ipi_<SOCKET>")
    s.add_argument("--inet", action="store_true")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=31415)
    s.add_argument("--launch", help="client command line to start once the socket listens")
    s.add_argument("--client-log", help="file for the launched client's stdout/stderr")
    s.add_argument("--calls", type=int, default=1)
    s.add_argument("--displace", type=float, default=0.0,
                   help="calls after the first: uniform random displacement, Angstrom")
    s.add_argument("--seed", type=int, default=7)
    s.add_argument("--init-string", default="", help="sent with INIT if the client asks")
    s.add_argument("--codata", choices=sorted(CODATA), default="2018",
                   help="Bohr and Hartree values for the conversions (default 2018)")
    s.add_argument("--accept-timeout", type=float, default=120.0)
    s.add_argument("--call-timeout", type=float, default=1800.0)
    s.add_argument("--exit-timeout", type=float, default=60.0)
    m = sub.add_parser("make-data", help="write the deterministic test data files")
    m.add_argument("which", choices=("si8", "cu108"))
    m.add_argument("path")
    args = parser.parse_args(argv)
    return serve(args) if args.command == "serve" else make_data(args)


if __name__ == "__main__":
    sys.exit(main())

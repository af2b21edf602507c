#!/usr/bin/python3
"""An i-PI client for OTF-Torch's tests: Lennard-Jones as LAMMPS' `pair_style lj/cut RC` with
`pair_coeff * * EPS SIGMA` computes it (metal units, no shift), answering over the i-PI socket
protocol in atomic units, with faults on request to exercise the server's error handling.

Standard library only (it runs under /usr/bin/python3 without numpy). The wire format follows
ASE's ase/calculators/socketio.py: 12-byte space-padded headers, native byte order, the cell h
with lattice vectors as columns sent in C order, the virial sent transposed.
"""

import argparse
import math
import os
import socket
import struct
import sys
import time

# CODATA 2018, as ASE's units and LAMMPS' `units metal` conversions use.
BOHR_ANGSTROM = 0.529177210903
HARTREE_EV = 27.211386245988

FAULTS = ('none', 'die', 'hang', 'garbage', 'nan', 'wrong-count', 'not-converged',
          'disconnect', 'never-connect', 'exit-at-start')
HEADER_BYTES = 12


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument('--unix', metavar='NAME', help='connect to /tmp/ipi_NAME')
    where.add_argument('--inet', metavar='HOST:PORT', help='connect over TCP')
    parser.add_argument('--lj', nargs=3, type=float, metavar=('EPS', 'SIGMA', 'RC'),
                        default=(0.0104, 3.405, 8.5), help='eV, Angstrom, Angstrom')
    parser.add_argument('--fault', choices=FAULTS, default='none')
    parser.add_argument('--fault-at', type=int, default=1, metavar='N',
                        help='the fault happens at the N-th POSDATA of this process')
    parser.add_argument('--fault-once', metavar='FILE',
                        help='fault only while FILE does not exist; create it when faulting')
    parser.add_argument('--calls-log', metavar='FILE',
                        help='append "call energy_eV" per completed call')
    parser.add_argument('--delay', type=float, default=0.0, metavar='S',
                        help='take S seconds more for each call (an expensive code)')
    parser.add_argument('--times-log', metavar='FILE',
                        help='append "received answered" (Unix times) per completed call')
    arguments = parser.parse_args()
    if arguments.unix is None and arguments.inet is None:
        # OTF-Torch's ClientProcess describes the server's address in the environment.
        mode = os.environ.get('OTF_IPI_MODE', '')
        if mode == 'unix':
            arguments.unix = os.environ['OTF_IPI_HOST']
        elif mode == 'inet':
            arguments.inet = '{}:{}'.format(os.environ['OTF_IPI_HOST'], os.environ['OTF_IPI_PORT'])
        else:
            parser.error('give --unix NAME or --inet HOST:PORT (or set OTF_IPI_MODE)')
    return arguments


class Faults:
    def __init__(self, kind, at, once_file):
        self.kind, self.at, self.once_file = kind, at, once_file

    def fires(self, kind, posdata_count):
        """True when fault `kind` happens now; a --fault-once file is created as it does."""
        if self.kind != kind:
            return False
        if kind not in ('never-connect', 'exit-at-start') and posdata_count != self.at:
            return False
        if self.once_file is not None:
            if os.path.exists(self.once_file):
                return False
            with open(self.once_file, 'w'):
                pass
        return True


def sleep_forever():
    while True:
        time.sleep(3600)


def connect(arguments):
    """Retries for 30 s: the server may start listening after the client starts."""
    if arguments.unix is not None:
        family, address = socket.AF_UNIX, '/tmp/ipi_' + arguments.unix
    else:
        host, port = arguments.inet.rsplit(':', 1)
        family, address = socket.AF_INET, (host, int(port))
    deadline = time.monotonic() + 30.0
    while True:
        connection = socket.socket(family, socket.SOCK_STREAM)
        try:
            connection.connect(address)
            return connection
        except OSError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class EndOfStream(Exception):
    pass


def receive(connection, size):
    chunks = []
    while size > 0:
        chunk = connection.recv(size)
        if not chunk:
            raise EndOfStream()
        chunks.append(chunk)
        size -= len(chunk)
    return b''.join(chunks)


def send_header(connection, name):
    connection.sendall(name.encode('ascii').ljust(HEADER_BYTES))


def lennard_jones(cell_rows, positions, epsilon, sigma, cutoff):
    """Energy (eV), forces (eV/A) and virial sum r_ij (x) f_ij (eV) as LAMMPS' lj/cut: every pair
    i<j and every atom with its own periodic images (half weight) within the cutoff, all images
    of a triclinic cell. Angstrom in."""
    a, b, c = cell_rows
    cross = lambda u, v: (u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                          u[0] * v[1] - u[1] * v[0])
    dot = lambda u, v: u[0] * v[0] + u[1] * v[1] + u[2] * v[2]
    volume = abs(dot(a, cross(b, c)))
    # Lattice planes along a are volume/|b x c| apart: images beyond cutoff/spacing + 1 along a
    # (the displacement wrapped to within half a cell) cannot be within the cutoff.
    reach = [int(math.ceil(cutoff / (volume / math.sqrt(dot(p, p))) + 0.5)) + 1
             for p in (cross(b, c), cross(c, a), cross(a, b))]
    reciprocal = [tuple(x / volume for x in cross(b, c)), tuple(x / volume for x in cross(c, a)),
                  tuple(x / volume for x in cross(a, b))]
    natoms = len(positions)
    energy = 0.0
    forces = [[0.0, 0.0, 0.0] for _ in range(natoms)]
    virial = [[0.0] * 3 for _ in range(3)]
    cutoff_squared = cutoff * cutoff
    for i in range(natoms):
        for j in range(i, natoms):
            d = [positions[i][k] - positions[j][k] for k in range(3)]
            shift = [round(dot(d, reciprocal[k])) for k in range(3)]
            d = [d[k] - shift[0] * a[k] - shift[1] * b[k] - shift[2] * c[k] for k in range(3)]
            for na in range(-reach[0], reach[0] + 1):
                for nb in range(-reach[1], reach[1] + 1):
                    for nc in range(-reach[2], reach[2] + 1):
                        if i == j and na == 0 and nb == 0 and nc == 0:
                            continue
                        r = [d[k] + na * a[k] + nb * b[k] + nc * c[k] for k in range(3)]
                        r_squared = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
                        if r_squared >= cutoff_squared:
                            continue
                        sr6 = (sigma * sigma / r_squared) ** 3
                        pair_energy = 4.0 * epsilon * (sr6 * sr6 - sr6)
                        # f_i = r_ij * fpair, as LAMMPS' PairLJCut::compute.
                        fpair = 24.0 * epsilon * (2.0 * sr6 * sr6 - sr6) / r_squared
                        weight = 0.5 if i == j else 1.0
                        energy += weight * pair_energy
                        if i != j:
                            for k in range(3):
                                forces[i][k] += r[k] * fpair
                                forces[j][k] -= r[k] * fpair
                        for k in range(3):
                            for m in range(3):
                                virial[k][m] += weight * r[k] * r[m] * fpair
    return energy, forces, virial


def main():
    arguments = parse_arguments()
    faults = Faults(arguments.fault, arguments.fault_at, arguments.fault_once)
    if faults.fires('exit-at-start', 0):
        sys.exit(1)
    if faults.fires('never-connect', 0):
        sleep_forever()
    epsilon, sigma, cutoff = arguments.lj

    connection = connect(arguments)
    state = 'NEEDINIT'
    posdata_count = 0
    calls = 0
    reply = None
    garbage_pending = False
    try:
        while True:
            message = receive(connection, HEADER_BYTES).decode('ascii').rstrip()
            if message == 'EXIT':
                return 0
            if message == 'STATUS':
                if garbage_pending:
                    connection.sendall(b'X' * HEADER_BYTES)
                    garbage_pending = False
                else:
                    send_header(connection, state)
            elif message == 'INIT':
                struct.unpack('=i', receive(connection, 4))  # bead index
                (length,) = struct.unpack('=i', receive(connection, 4))
                receive(connection, length)
                state = 'READY'
            elif message == 'POSDATA':
                h = struct.unpack('=9d', receive(connection, 72))
                receive(connection, 72)  # the inverse of h
                (natoms,) = struct.unpack('=i', receive(connection, 4))
                flat = struct.unpack('={}d'.format(3 * natoms), receive(connection, 24 * natoms))
                posdata_count += 1
                received = time.time()
                if arguments.delay > 0:
                    time.sleep(arguments.delay)
                if faults.fires('die', posdata_count):
                    sys.exit(3)
                if faults.fires('hang', posdata_count):
                    sleep_forever()
                if faults.fires('disconnect', posdata_count):
                    connection.close()
                    return 0
                if faults.fires('garbage', posdata_count):
                    garbage_pending = True
                # h has the lattice vectors as columns: row vector a is (h[0], h[3], h[6]).
                cell_rows = [[h[3 * k + i] * BOHR_ANGSTROM for k in range(3)] for i in range(3)]
                positions = [[flat[3 * i + k] * BOHR_ANGSTROM for k in range(3)]
                             for i in range(natoms)]
                energy, forces, virial = lennard_jones(cell_rows, positions, epsilon, sigma, cutoff)
                extra = b'\0'  # ASE's "no extra data"
                if faults.fires('nan', posdata_count):
                    forces[0][1] = float('nan')
                if faults.fires('wrong-count', posdata_count):
                    forces.append([0.0, 0.0, 0.0])
                if faults.fires('not-converged', posdata_count):
                    extra = b'{"converged": false}'
                reply = (energy, forces, virial, extra)
                state = 'HAVEDATA'
            elif message == 'GETFORCE':
                energy, forces, virial, extra = reply
                to_force = BOHR_ANGSTROM / HARTREE_EV
                payload = [struct.pack('=d', energy / HARTREE_EV),
                           struct.pack('=i', len(forces))]
                payload += [struct.pack('=3d', *(f * to_force for f in force)) for force in forces]
                # Transposed, as ASE's sendforce sends virial.T.
                payload.append(struct.pack('=9d', *(virial[m][k] / HARTREE_EV
                                                    for k in range(3) for m in range(3))))
                payload.append(struct.pack('=i', len(extra)) + extra)
                send_header(connection, 'FORCEREADY')
                connection.sendall(b''.join(payload))
                calls += 1
                if arguments.calls_log is not None:
                    with open(arguments.calls_log, 'a') as log:
                        log.write('{} {!r}\n'.format(calls, energy))
                if arguments.times_log is not None:
                    with open(arguments.times_log, 'a') as log:
                        log.write('{!r} {!r}\n'.format(received, time.time()))
                state = 'READY'
            else:
                print('ipi_test_client: unexpected message {!r}'.format(message), file=sys.stderr)
                return 2
    except (EndOfStream, ConnectionResetError, BrokenPipeError):
        return 0
    finally:
        connection.close()


if __name__ == '__main__':
    sys.exit(main())

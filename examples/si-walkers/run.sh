#!/usr/bin/env bash
# The walkers example and its report: one MPI job of four LAMMPS partitions (one rank each).
# LMP names the lmp binary (default: lmp on PATH), MPIRUN the launcher (default: mpirun);
# LAMMPS_PLUGIN_PATH must hold otfplugin.so. Extra arguments go to lmp, e.g. -var delay 10.
# On fewer cores than walkers, waiting ranks must yield the core (OMPI_MCA_mpi_yield_when_idle).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source ../lammps-potentials.sh
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
launcher=(${MPIRUN:-mpirun} -np 4)
if [[ $(id -u) -eq 0 ]]; then launcher+=(--allow-run-as-root); fi
if (( $(nproc) < 4 )); then launcher+=(--oversubscribe); fi
# Journals and learning logs are appended to (a crash loses nothing): start this run's afresh.
rm -f labels.walker*.extxyz learning.walker*.csv
"${launcher[@]}" "${LMP:-lmp}" -partition 4x1 -in in.si-walkers -log log.lammps "$@"
python3 walkers_report.py | tee report.txt

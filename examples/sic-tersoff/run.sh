#!/usr/bin/env bash
# The two-element example and its accuracy report. LMP names the lmp binary (default: lmp on PATH)
# and LAMMPS_PLUGIN_PATH must hold otfplugin.so (scripts/setup.sh example sets both). Extra
# arguments go to lmp, e.g. bash run.sh -var precision bfloat16.
# LAMMPS' SiC.tersoff is read from LAMMPS_POTENTIALS, by default the lmp's own
# <prefix>/share/lammps/potentials (../lammps-potentials.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source ../lammps-potentials.sh
"${LMP:-lmp}" -in in.sic-tersoff -log log.lammps "$@"
python3 report.py log.lammps | tee report.txt

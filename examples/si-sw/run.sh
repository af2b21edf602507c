#!/usr/bin/env bash
# The Si example and its accuracy report. LMP names the lmp binary (default: lmp on PATH) and
# LAMMPS_PLUGIN_PATH must hold otfplugin.so; scripts/setup.sh example sets both. Extra arguments
# go to lmp, e.g. bash run.sh -var precision bfloat16.
# LAMMPS' Si.sw is read from LAMMPS_POTENTIALS, by default the lmp's own
# <prefix>/share/lammps/potentials (../lammps-potentials.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source ../lammps-potentials.sh
"${LMP:-lmp}" -in in.si-sw -log log.lammps "$@"
python3 ../accuracy_report.py log.lammps --label "configurations at 1000 K" \
    --force-target 0.05 --energy-target 2 --max-calls 3 | tee report.txt

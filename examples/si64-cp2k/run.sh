#!/usr/bin/env bash
# 64-atom silicon from CP2K on the fly (README.md): the training run, the held-out DFT data, the
# warm-started second run, then the report. LMP names the lmp binary (default: lmp on PATH)
# and LAMMPS_PLUGIN_PATH must hold otfplugin.so (scripts/setup.sh example sets both). Needs
# Debian's cp2k and cp2k-data. About an hour on two cores (one for LAMMPS, one for CP2K).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -f si64-dft.extxyz si64-dft-warm.extxyz heldout-*.extxyz heldout-*.dump cp2k-*.log
for stage in train heldout warm; do
  start=$(date +%s)
  "${LMP:-lmp}" -in in.si64-cp2k -log "log-${stage}.lammps" -var stage "$stage" \
      -var socket "si64-$$" "$@"
  echo "$(( $(date +%s) - start ))" > "wall-${stage}.txt"
done
/usr/bin/python3 report.py | tee report.txt

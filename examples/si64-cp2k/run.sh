#!/usr/bin/env bash
# 64-atom silicon from CP2K on the fly (README.md): the training run, the held-out DFT data (when
# it is not there), the warm-started second run, then the report. LMP names the lmp binary (default: lmp on PATH)
# and LAMMPS_PLUGIN_PATH must hold otfplugin.so (scripts/setup.sh example sets both). Needs
# Debian's cp2k and cp2k-data. On two cores (one for LAMMPS, one for CP2K): minutes with the
# shipped held-out data, about half an hour more to make it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -f si64-dft.extxyz si64-dft-warm.extxyz heldout-*-si64*.dump cp2k-*.log
# The held-out DFT data ships with the example (heldout-*.extxyz and the configurations in
# heldout-<T>.dump); delete those files to make it anew from the model this run trains.
stages="train warm" evaluate=yes
if [[ ! -f heldout-1000K.extxyz || ! -f heldout-600K.extxyz ]]; then
  rm -f heldout-1000K.* heldout-600K.*
  stages="train heldout warm" evaluate=no
fi
for stage in $stages; do
  start=$(date +%s)
  "${LMP:-lmp}" -in in.si64-cp2k -log "log-${stage}.lammps" -var stage "$stage" \
      -var evaluate "$evaluate" -var socket "si64-$$" "$@"
  echo "$(( $(date +%s) - start ))" > "wall-${stage}.txt"
done
/usr/bin/python3 report.py | tee report.txt

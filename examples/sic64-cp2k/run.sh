#!/usr/bin/env bash
# 3C-SiC from CP2K on the fly (README.md): the held-out DFT data (when it is not there), the
# training run, the warm-started second run, then the report. LMP names the lmp binary (default:
# lmp on PATH) and LAMMPS_PLUGIN_PATH must hold otfplugin.so (scripts/setup.sh example sets both).
# Needs Debian's cp2k and cp2k-data. Two cores: one for LAMMPS and CP2K, one for the held-out
# labelling while it runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -f sic64-dft.extxyz sic64-dft-warm.extxyz heldout-*-sic64*.dump cp2k-*.log learning-*.csv wall-*.txt
source ../lammps-potentials.sh
heldout_pid=
labelled() { [[ -f $1 ]] && (( $(grep -c "^64$" "$1") >= 8 )); }
if ! labelled heldout-1000K.extxyz || ! labelled heldout-1600K.extxyz ||
   ! labelled heldout-600K.extxyz; then
  # The configurations first (seconds: the training runs replay them at their end), then their
  # DFT labels on the second core while the training runs.
  [[ -f heldout-1000K.dump && -f heldout-1600K.dump && -f heldout-600K.dump ]] ||
    "${LMP:-lmp}" -in in.heldout-md -log log-heldout-md.lammps
  bash make_heldout.sh > make_heldout.log 2>&1 &
  heldout_pid=$!
fi
for stage in train warm; do
  start=$(date +%s)
  "${LMP:-lmp}" -in in.sic64-cp2k -log "log-${stage}.lammps" -var stage "$stage" \
      -var socket "sic64-$$" "$@"
  echo "$(( $(date +%s) - start ))" > "wall-${stage}.txt"
done
[[ -z $heldout_pid ]] || wait "$heldout_pid"
/usr/bin/python3 report.py | tee report.txt

#!/usr/bin/env bash
# Held-out DFT data of examples/sic64-cp2k (README.md): Tersoff MD configurations at 1000 K, 1600 K
# and 600 K (in.heldout-md), each labelled by a CP2K single point with the training run's settings
# (label_heldout.py; 24 calculations of about 2.5 minutes on one core). An interrupted labelling
# continues where it stopped when this is run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source ../lammps-potentials.sh
if [[ ! -f heldout-1000K.dump || ! -f heldout-1600K.dump || ! -f heldout-600K.dump ]]; then
  "${LMP:-lmp}" -in in.heldout-md -log log-heldout-md.lammps "$@"
fi
for temperature in 1000K 1600K 600K; do
  /usr/bin/python3 label_heldout.py "heldout-${temperature}.dump" "heldout-${temperature}.extxyz"
done

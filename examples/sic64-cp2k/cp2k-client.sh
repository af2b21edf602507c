#!/usr/bin/env bash
# The i-PI client that fix otf/train starts (client "bash cp2k-client.sh"): CP2K's driver input is
# written from sic64.data (atom order and kinds, types 1 Si and 2 C; the socket from OTF_IPI_HOST,
# which the fix sets), then CP2K runs on one core. Settings: ../si-cp2k/make_cp2k_input.py with
# 400 Ry (relative 50) for carbon's harder pseudopotential (PBE, GTH-PBE-q4, DZVP-MOLOPT-SR-GTH,
# Gamma point, 300 K Fermi smearing, diagonalisation); label_heldout.py uses the same.
set -euo pipefail
input="sic64-driver-${OTF_IPI_HOST:-sic64}.inp"
/usr/bin/python3 ../si-cp2k/make_cp2k_input.py sic64.data --mode driver --elements Si C \
    --cutoff 400 --rel-cutoff 50 -o "$input"
OMP_NUM_THREADS=1 exec cp2k -i "$input"

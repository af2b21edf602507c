#!/usr/bin/env bash
# The i-PI client that fix otf/train starts (client "bash cp2k-client.sh"): CP2K's driver input is
# written from si64.data (atom order and kinds; the socket from OTF_IPI_HOST, which the fix sets),
# then CP2K runs on one core. Settings: ../si-cp2k/make_cp2k_input.py (PBE, GTH-PBE-q4,
# DZVP-MOLOPT-SR-GTH, 200 Ry, Gamma point, 300 K Fermi smearing, diagonalisation).
set -euo pipefail
input="si64-driver-${OTF_IPI_HOST:-si64}.inp"
/usr/bin/python3 ../si-cp2k/make_cp2k_input.py si64.data --mode driver -o "$input"
OMP_NUM_THREADS=1 exec cp2k -i "$input"

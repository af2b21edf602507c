#!/usr/bin/env bash
# Copper from ASE's EMT behind ASE's i-PI SocketClient, then held-out errors (README.md). LMP
# names the lmp binary (default: lmp on PATH); LAMMPS_PLUGIN_PATH must hold otfplugin.so. Needs
# Debian's python3-ase (for /usr/bin/python3). Extra arguments go to lmp.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -f cu-emt.extxyz cu-emt-heldout.extxyz ase-client.log ase-heldout.log
start=$(date +%s)
"${LMP:-lmp}" -in in.cu-ase -log log.lammps -var socket "cu-ase-$$" "$@"
end=$(date +%s)
/usr/bin/python3 ../heldout_report.py --log log.lammps --training cu-emt.extxyz \
  --heldout cu-emt-heldout.extxyz --fix train --reference EMT \
  --wall-seconds $((end - start)) | tee report.txt

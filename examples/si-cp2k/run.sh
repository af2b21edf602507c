#!/usr/bin/env bash
# Silicon from CP2K on the fly, then held-out DFT errors (README.md). LMP names the lmp binary
# (default: lmp on PATH) and LAMMPS_PLUGIN_PATH must hold otfplugin.so (scripts/setup.sh sets
# both for its own runs). Needs Debian's cp2k and cp2k-data. Extra arguments go to lmp, e.g.
# bash run.sh -var train_steps 300.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rm -f si-dft.extxyz si-dft-heldout.extxyz cp2k-driver.log cp2k-heldout.log
start=$(date +%s)
"${LMP:-lmp}" -in in.si-cp2k -log log.lammps -var socket "si-cp2k-$$" "$@"
end=$(date +%s)
/usr/bin/python3 ../heldout_report.py --log log.lammps --wall-seconds $((end - start)) | tee report.txt

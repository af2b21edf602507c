#!/usr/bin/env bash
# The Bayesian-learner probe on the main example's task: makes the SW data with LMP (default lmp on
# PATH) and runs bench_bayesian_learner (BENCH, default ../../build/bench/bench_bayesian_learner).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../examples/lammps-potentials.sh"
lmp=${LMP:-lmp}
bench=${BENCH:-$here/../../build/bench/bench_bayesian_learner}
work=${WORK:-$here/data}
mkdir -p "$work" && cd "$work"
[[ -f heldout-1000K.dump ]] || "$lmp" -log none -screen none -in "$here/make_data.lmp" -var T 1000 -var seed 87287
[[ -f heldout-600K.dump ]] || "$lmp" -log none -screen none -in "$here/make_data.lmp" -var T 600 -var seed 1234
[[ -f heldout-1400K.dump ]] || "$lmp" -log none -screen none -in "$here/make_data.lmp" -var T 1400 -var seed 4321
lscpu | grep -m1 "Model name"
"$bench" training-trajectory.dump heldout-1000K.dump heldout-600K.dump heldout-1400K.dump

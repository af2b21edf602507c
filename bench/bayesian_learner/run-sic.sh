#!/usr/bin/env bash
# The Bayesian-learner probe on examples/sic-tersoff's task (SiC from Tersoff, 1000 K then heated
# to 1600 K): makes the Tersoff data with LMP (a training trajectory on the example's schedule and
# validation sets at 1000 and 1600 K from velocities the example's held-out sets do not use), then
# fits the linear model to labels every 100 steps of the trajectory for several radial basis sizes
# and tests it on the validation sets. The example's held-out sets are not used: this is how its
# descriptor was chosen (docs/bayesian-learner.md). BENCH defaults to the build's binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../examples/lammps-potentials.sh"
lmp=${LMP:-lmp}
bench=${BENCH:-$here/../../build/bench/bench_bayesian_learner}
work=${WORK:-$here/data-sic}
mkdir -p "$work" && cd "$work"
[[ -f validation-1600K.dump ]] || "$lmp" -log none -screen none -in "$here/make_sic_data.lmp"
lscpu | grep -m1 "Model name"
for radial in ${RADIAL:-12 16 24 32}; do
  echo "== cutoff 3.2, $radial radial functions, 6 in the angular terms, order 3"
  "$bench" --species 2 --cutoff 3.2 --radial "$radial" --angular 6 --degrees 1 --label-every 100 \
    --counts 5,10,20,30 training-trajectory.dump validation-1000K.dump validation-1600K.dump
done

#!/usr/bin/env bash
# Makes the Python environment of the matched peer (bench/bench_training_peer.py): PyPI's torch of
# the same version as the LibTorch we build against (scripts/fetch-libtorch.sh's cached wheel, then
# its dependencies from PyPI, several GB of CUDA libraries that the CPU peer loads but does not use),
# in a virtual environment of the pyenv/system python3 the wheel is built for. Prints its python.
#   bench/setup-peer.sh [2.15.0]
set -euo pipefail
version=${1:-2.15.0}
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
venv=$cache_root/peer-venv-torch-$version
if [[ ! -f $venv/.complete ]]; then
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  "$root/scripts/fetch-libtorch.sh" "$version" >/dev/null
  wheel=$(ls "$cache_root"/wheels/torch-"$version"-*.whl | head -n1)
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$wheel" numpy >&2
  "$venv/bin/python" -c "import torch; assert torch.__version__.startswith('$version')"
  touch "$venv/.complete"
fi
echo "$venv/bin/python"

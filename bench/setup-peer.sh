#!/usr/bin/env bash
# Makes the Python environment of the matched peer (bench/bench_training_peer.py): PyPI's torch of
# the same version as the LibTorch we build against (scripts/fetch-libtorch.sh's cached wheel, then
# its dependencies from PyPI, several GB of CUDA libraries that the CPU peer loads but does not use),
# in a virtual environment of the pyenv/system python3 the wheel is built for. Prints its python.
# --with-mace also installs mace-torch (pinned, with its e3nn pin) for the MACE rows (--mace).
#   bench/setup-peer.sh [2.15.0] [--with-mace]
set -euo pipefail
version=2.15.0
with_mace=0
for argument in "$@"; do
  case $argument in
    --with-mace) with_mace=1 ;;
    [0-9]*) version=$argument ;;
    *) echo "setup-peer.sh: unknown argument '$argument' (expected a torch version or --with-mace)" >&2; exit 2 ;;
  esac
done
mace_version=0.3.16
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
venv=$cache_root/peer-venv-torch-$version
if [[ ! -f $venv/.complete ]]; then
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  "$root/scripts/fetch-libtorch.sh" "$version" >/dev/null
  wheel=$(ls "$cache_root"/wheels/torch-"$version"-*.whl | head -n1)
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$wheel" numpy >&2
  "$venv/bin/python" -c "import torch; assert torch.__version__.startswith('$version')"
  touch "$venv/.complete"
fi
if [[ $with_mace == 1 && ! -f $venv/.mace-$mace_version ]]; then
  # torch stays the pinned version: mace-torch only asks for torch>=1.12.
  "$venv/bin/python" -m pip install -q "mace-torch==$mace_version" "torch==$version" >&2
  "$venv/bin/python" -c "import torch; assert torch.__version__.startswith('$version')"
  touch "$venv/.mace-$mace_version"
fi
echo "$venv/bin/python"

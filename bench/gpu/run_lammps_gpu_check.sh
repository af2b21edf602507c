#!/usr/bin/env bash
# The device check inside LAMMPS (issue 19), one script for the device tool. Run from the
# repository root on the GPU machine with the archive of bench/gpu/pack-lammps-cuda.sh carried:
#   run(command="bash bench/gpu/run_lammps_gpu_check.sh", carry=[".gpu-carry"])
# It (0) records the GPU, PyTorch and the MPI it finds, (1) unpacks the CUDA LAMMPS and Kokkos at
# the paths they were built for, (2) builds the plugin against them and the machine's CUDA
# LibTorch (PyTorch's, torch.utils.cmake_prefix_path; the engine with g++, otf/kk through Kokkos'
# launcher and nvcc_wrapper), (3) runs bench/gpu/lammps_gpu_check.py (agreement, training in three
# precisions, speed and memory), writing everything under $OUT. GPU_CHECK_ARGS adds arguments.
# GPU_CHECK_DRY_RUN=1 runs the same steps on a machine without a GPU, with an archive of a host
# Kokkos LAMMPS (pack-lammps-cuda.sh ARCHIVE PREFIX), TORCH_DIR pointing at a CPU LibTorch, and the
# driver on the host space with the tensor path (docs/gpu-check-dry-run/). OTF_CMAKE_ARGS adds
# arguments to the plugin's configure (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache).
set -euo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
carry=${GPU_CARRY:-.gpu-carry/lammps-cuda.tar}
jobs=$(nproc)

dry_run=${GPU_CHECK_DRY_RUN:-0}
driver_args=()
echo "== 0. machine"
if [[ $dry_run == 1 ]]; then
  echo "dry run: no GPU; host Kokkos with the tensor path" | tee "$out/gpu.txt"
  driver_args=(--kokkos "-k on t 1 -sf kk" --kk-options " resident yes" --cells 4,6 --cpu-cells 4 --atom-steps 2e5)
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' | tee -a "$out/gpu.txt"
  nvcc --version | tail -n 1 | tee -a "$out/gpu.txt"
fi
# The carried LAMMPS links Open MPI 4 (libmpi.so.40, Debian 12's 4.1); the plugin needs MPI headers.
if ! ldconfig -p | grep -q 'libmpi.so.40'; then
  echo "no Open MPI 4 runtime (libmpi.so.40) on this machine: the carried LAMMPS cannot start" | tee -a "$out/gpu.txt"
  exit 3
fi
command -v mpicxx >/dev/null || { echo "no mpicxx: the plugin cannot be configured" | tee -a "$out/gpu.txt"; exit 3; }

echo "== 1. unpack $carry"
stage=$(mktemp -d)
tar -C "$stage" -xf "$carry"
tar -C / -xJf "$stage/prefixes.tar.xz"
lammps=$(cat "$stage/lammps-prefix.txt")
kokkos_dir=$(cat "$lammps/kokkos-dir.txt")
"$lammps/bin/lmp" -h | grep -A3 '^Installed packages' | tee -a "$out/gpu.txt"

echo "== 2. plugin against $lammps and PyTorch's LibTorch"
torch_dir=${TORCH_DIR:-$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')/Torch}
build=${GPU_CHECK_BUILD:-/tmp/otf-gpu}
start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLAMMPS_ROOT="$lammps" -DKokkos_DIR="$kokkos_dir" \
  -DTorch_DIR="$torch_dir" -Dnlohmann_json_DIR="$stage/json/share/cmake/nlohmann_json" \
  -DOTF_BUILD_UNIT_TESTS=OFF ${OTF_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 || { tail -n 40 "$out/configure.log"; exit 1; }
cmake --build "$build" --parallel "$jobs" --target otfplugin >"$out/build.log" 2>&1 ||
  { grep -m 20 -B2 -A6 'error' "$out/build.log"; exit 1; }
echo "plugin built in $(($(date +%s) - start)) s"

echo "== 3. the checks"
# shellcheck disable=SC2086  # GPU_CHECK_ARGS and OTF_CMAKE_ARGS are word lists
PYTHONUNBUFFERED=1 python3 bench/gpu/lammps_gpu_check.py --lmp "$lammps/bin/lmp" \
  --plugin "$build/plugins/otfplugin.so" --out "$out" --cpu-threads "$jobs" "${driver_args[@]}" ${GPU_CHECK_ARGS:-}

#!/usr/bin/env bash
# Packs what the device check inside LAMMPS (bench/gpu/run_lammps_gpu_check.sh) needs from this
# machine into one archive for the device tool's `carry` (64 MiB in all): the CUDA LAMMPS
# (OTF_LAMMPS=2025 OTF_KOKKOS_BACKEND=cuda scripts/build-lammps.sh: lmp, liblammps, headers, CMake
# package), the CUDA Kokkos it links, and Debian's nlohmann JSON headers with their CMake package.
# The LAMMPS and Kokkos folders keep their absolute paths (their CMake packages and run paths name
# them; the device runs as root, so ~ is /root there too). Building LAMMPS for CUDA takes hours on
# 2 cores (every file through nvcc), which is why it is built here and carried, not built there.
# Usage: bench/gpu/pack-lammps-cuda.sh [ARCHIVE [LAMMPS_PREFIX]]   (default .gpu-carry/lammps-cuda.tar
# and the CUDA build; another prefix with an external Kokkos, e.g. the Serial one, packs that
# instead, for a dry run of the device script: GPU_CHECK_DRY_RUN=1 run_lammps_gpu_check.sh)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
archive=${1:-$root/.gpu-carry/lammps-cuda.tar}
lammps=${2:-$(OTF_LAMMPS=2025 OTF_KOKKOS_BACKEND=cuda "$root/scripts/build-lammps.sh" | tail -n 1)}
[[ -f $lammps/kokkos-dir.txt ]] || { echo "$lammps has no external Kokkos (kokkos-dir.txt)" >&2; exit 1; }
kokkos=$(dirname "$(dirname "$(dirname "$(cat "$lammps/kokkos-dir.txt")")")")
[[ -x $lammps/bin/lmp && -f $kokkos/.complete ]] || { echo "no complete CUDA LAMMPS / Kokkos build" >&2; exit 1; }
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/json/include" "$staging/json/share/cmake"
cp -r /usr/include/nlohmann "$staging/json/include/"
cp -r /usr/share/cmake/nlohmann_json "$staging/json/share/cmake/"
printf '%s\n' "$lammps" >"$staging/lammps-prefix.txt"
# Shared libraries stripped of their symbol tables (the CUDA fat binaries stay).
mkdir -p "$(dirname "$archive")"
tar -C / -cf "$staging/prefixes.tar" --exclude='*.a' "${lammps#/}" "${kokkos#/}"
mkdir "$staging/unpacked" && tar -C "$staging/unpacked" -xf "$staging/prefixes.tar"
find "$staging/unpacked" -type f \( -name '*.so*' -o -path '*/bin/lmp' \) -exec strip --strip-unneeded {} +
tar -C "$staging/unpacked" -cf - . | xz -T0 -9 >"$staging/prefixes.tar.xz"
tar -C "$staging" -cf "$archive" json lammps-prefix.txt prefixes.tar.xz
size=$(stat -c %s "$archive")
echo "pack-lammps-cuda: $archive, $((size / 1048576)) MiB (the device tool carries 64 MiB in all)" >&2
((size < 60 * 1048576)) || { echo "pack-lammps-cuda: too large to carry" >&2; exit 1; }
echo "$archive"

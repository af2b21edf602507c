#!/usr/bin/env bash
# Builds Kokkos (shared, C++17) into a cache folder named by its configuration, for the KOKKOS
# package of a LAMMPS that needs a newer Kokkos than Debian's 3.4 (LAMMPS 4 Feb 2025 asks for
# 4.5.01 or newer: docs/lammps-versions.md). Back ends: serial (the default; Serial only) or cuda
# (Serial and Cuda for the GPU architecture OTF_KOKKOS_CUDA_ARCH, default HOPPER90, i.e. sm_90, with
# the nvcc on PATH and Kokkos' nvcc_wrapper; Kokkos 4.6's CUDA wrappers predate CUDA 13, so
# scripts/kokkos-patches/cuda13-runtime-api.patch adapts the three calls that changed). No Debian suite served here has one, and
# Debian strips LAMMPS' bundled copy, so the source comes from the kokkos/kokkos release:
#   OTF_KOKKOS_SOURCE=<kokkos-X.Y.ZZ.tar.gz or a source folder>, or
#   $OTF_TORCH_CACHE/sources/kokkos-<version>.tar.gz, or
#   a download of the release from GitHub (https://github.com/kokkos/kokkos/releases), or,
#   for 4.5.01 only, PyPI: the sdist of pycompadre 1.7.6 (sha256-pinned) carries Kokkos 4.5.01 in
#   its kokkos/ folder, file for file the kokkos/kokkos tag 4.5.01 (checked with diff -r against
#   that tag; the only differences are files the tag's own archive leaves out by export-ignore and
#   BUILD.md). PyPI is the one registry that a fresh CI machine reaches which serves a Kokkos that
#   LAMMPS 4 Feb 2025 accepts (docs/lammps-versions.md, "Kokkos sources").
# Usage: scripts/build-kokkos.sh VERSION [serial|cuda]   Prints the install prefix on its last line;
# exit 3 when no source can be had (the caller then builds LAMMPS without KOKKOS and says so).
set -euo pipefail
version=${1:?usage: $0 KOKKOS_VERSION [serial|cuda]}
backend=${2:-serial}
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
jobs=${OTF_BUILD_JOBS:-$(nproc)}
log() { echo "Kokkos: $*" >&2; }

compiler_version=$(${CXX:-c++} -dumpfullversion 2>/dev/null || echo unknown)
options=(-D Kokkos_ENABLE_SERIAL=ON -D BUILD_SHARED_LIBS=ON -D CMAKE_CXX_STANDARD=17
         -D CMAKE_POSITION_INDEPENDENT_CODE=ON -D CMAKE_BUILD_TYPE=Release)
patches=()
case "$backend" in
  serial) tag=serial ;;
  cuda)
    command -v nvcc >/dev/null || { log "the cuda back end needs nvcc on PATH"; exit 1; }
    cuda_arch=${OTF_KOKKOS_CUDA_ARCH:-HOPPER90}
    cuda_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    options+=(-D Kokkos_ENABLE_CUDA=ON -D "Kokkos_ARCH_$cuda_arch=ON" -D Kokkos_ENABLE_CUDA_LAMBDA=ON)
    patches=(cuda13-runtime-api.patch)
    tag="cuda$cuda_version-${cuda_arch,,}" ;;
  *) log "back end '$backend': accepted values are serial and cuda"; exit 2 ;;
esac
# The serial folder name is unchanged from before the cuda back end existed.
keyed=("$version" "${options[@]}" "$compiler_version")
if [[ $backend == cuda ]]; then
  keyed+=("$backend" "$(for p in "${patches[@]}"; do cat "$(dirname "$0")/kokkos-patches/$p"; done)")
fi
digest=$(printf '%s\n' "${keyed[@]}" | sha256sum | cut -c1-10)
prefix="$cache_root/kokkos-$version-$tag-gcc$compiler_version-$digest"
if [[ -f "$prefix/.complete" ]]; then
  log "reusing $prefix"
  echo "$prefix"
  exit 0
fi

work="$prefix.work"
rm -rf "$work"
mkdir -p "$work"
source_path=${OTF_KOKKOS_SOURCE:-$cache_root/sources/kokkos-$version.tar.gz}
# PyPI's copy of Kokkos 4.5.01 (see the header): repacked as sources/kokkos-4.5.01.tar.gz.
pycompadre_sdist=pycompadre-1.7.6.tar.gz
pycompadre_url=https://files.pythonhosted.org/packages/ef/9b/282133c69b9dfb6fff5861a059336caedfef3bb5983242d433c83c56f327/$pycompadre_sdist
pycompadre_sha256=c766ec4d445ce076069be4b8c51a23ffac4ee79ea949ca86446bfd8c299b154c
kokkos_from_pypi() {
  local sdist="$work/$pycompadre_sdist"
  log "trying PyPI: $pycompadre_sdist carries Kokkos 4.5.01"
  curl -fsSL --connect-timeout 10 --retry 2 -o "$sdist" "$pycompadre_url" || return 1
  echo "$pycompadre_sha256  $sdist" | sha256sum --check --status ||
    { log "$pycompadre_sdist: sha256 mismatch"; return 1; }
  mkdir -p "$work/repack/kokkos-4.5.01"
  tar -xzf "$sdist" -C "$work/repack/kokkos-4.5.01" --strip-components=2 "${pycompadre_sdist%.tar.gz}/kokkos"
  tar -czf "$source_path.part" -C "$work/repack" kokkos-4.5.01
  rm -rf "$work/repack" "$sdist"
}
if [[ ! -e $source_path ]]; then
  url="https://github.com/kokkos/kokkos/releases/download/$version/kokkos-$version.tar.gz"
  log "no source at $source_path; trying $url"
  mkdir -p "$(dirname "$source_path")"
  if ! curl -fsSL --connect-timeout 10 -o "$source_path.part" "$url" &&
     ! { [[ $version == 4.5.01 ]] && kokkos_from_pypi; }; then
    rm -rf "$source_path.part" "$work"
    log "Kokkos $version source not available (set OTF_KOKKOS_SOURCE to its release tarball)"
    exit 3
  fi
  mv "$source_path.part" "$source_path"
fi
if [[ -d $source_path ]]; then
  src=$source_path
else
  tar -xf "$source_path" -C "$work"
  src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'kokkos*' | head -n 1)
fi
found=$(sed -n 's/.*set(Kokkos_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$src/CMakeLists.txt" | paste -sd.)
[[ $found == "$(echo "$version" | awk -F. '{printf "%d.%d.%d", $1, $2, $3}')" ]] ||
  { log "source $source_path is Kokkos $found, not $version"; exit 1; }

compiler_args=()
if [[ $backend == cuda ]]; then
  # A copy of the source: the patch and nvcc_wrapper's default architecture (sm_70, which CUDA 13
  # no longer compiles for; LAMMPS and the plugin compile through the installed wrapper) change it.
  if [[ $src != "$work"/* ]]; then cp -r "$src" "$work/source"; src=$work/source; fi
  for p in "${patches[@]}"; do
    log "applying $p"
    patch -d "$src" -p1 --quiet <"$(dirname "$0")/kokkos-patches/$p"
  done
  sed -i "s/^default_arch=\"sm_[0-9]*\"/default_arch=\"sm_${cuda_arch//[!0-9]/}\"/" "$src/bin/nvcc_wrapper"
  compiler_args=(-D CMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper")
fi

log "building Kokkos $version ($backend) with $jobs jobs"
cmake -S "$src" -B "$work/build" -D CMAKE_INSTALL_PREFIX="$prefix" -D CMAKE_INSTALL_LIBDIR=lib \
  "${options[@]}" "${compiler_args[@]}" >"$work/configure.log" 2>&1 ||
  { tail -n 30 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --parallel "$jobs" >"$work/build.log" 2>&1 ||
  { grep -m 20 -A8 'error' "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" >"$work/install.log" 2>&1
rm -rf "$work"
touch "$prefix/.complete"
log "installed into $prefix"
echo "$prefix"

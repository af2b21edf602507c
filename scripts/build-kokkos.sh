#!/usr/bin/env bash
# Builds Kokkos (Serial backend, shared, C++17) into a cache folder named by its configuration, for
# the KOKKOS package of a LAMMPS that needs a newer Kokkos than Debian's 3.4 (LAMMPS 4 Feb 2025
# asks for 4.5.01 or newer: docs/lammps-versions.md). No Debian suite served here has one, and
# Debian strips LAMMPS' bundled copy, so the source comes from the kokkos/kokkos release:
#   OTF_KOKKOS_SOURCE=<kokkos-X.Y.ZZ.tar.gz or a source folder>, or
#   $OTF_TORCH_CACHE/sources/kokkos-<version>.tar.gz, or
#   a download of the release from GitHub (https://github.com/kokkos/kokkos/releases).
# Usage: scripts/build-kokkos.sh VERSION   Prints the install prefix on its last line; exit 3 when
# no source can be had (the caller then builds LAMMPS without KOKKOS and says so).
set -euo pipefail
version=${1:?usage: $0 KOKKOS_VERSION}
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
jobs=${OTF_BUILD_JOBS:-$(nproc)}
log() { echo "Kokkos: $*" >&2; }

compiler_version=$(${CXX:-c++} -dumpfullversion 2>/dev/null || echo unknown)
options=(-D Kokkos_ENABLE_SERIAL=ON -D BUILD_SHARED_LIBS=ON -D CMAKE_CXX_STANDARD=17
         -D CMAKE_POSITION_INDEPENDENT_CODE=ON -D CMAKE_BUILD_TYPE=Release)
digest=$(printf '%s\n' "$version" "${options[@]}" "$compiler_version" | sha256sum | cut -c1-10)
prefix="$cache_root/kokkos-$version-serial-gcc$compiler_version-$digest"
if [[ -f "$prefix/.complete" ]]; then
  log "reusing $prefix"
  echo "$prefix"
  exit 0
fi

work="$prefix.work"
rm -rf "$work"
mkdir -p "$work"
source_path=${OTF_KOKKOS_SOURCE:-$cache_root/sources/kokkos-$version.tar.gz}
if [[ ! -e $source_path ]]; then
  url="https://github.com/kokkos/kokkos/releases/download/$version/kokkos-$version.tar.gz"
  log "no source at $source_path; trying $url"
  mkdir -p "$(dirname "$source_path")"
  if ! curl -fsSL --connect-timeout 10 -o "$source_path.part" "$url"; then
    rm -f "$source_path.part"
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

log "building Kokkos $version (Serial) with $jobs jobs"
cmake -S "$src" -B "$work/build" -D CMAKE_INSTALL_PREFIX="$prefix" -D CMAKE_INSTALL_LIBDIR=lib \
  "${options[@]}" >"$work/configure.log" 2>&1 ||
  { tail -n 30 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --parallel "$jobs" >"$work/build.log" 2>&1 ||
  { grep -m 20 -A8 'error' "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" >"$work/install.log" 2>&1
rm -rf "$work"
touch "$prefix/.complete"
log "installed into $prefix"
echo "$prefix"

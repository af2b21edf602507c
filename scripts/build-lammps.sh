#!/usr/bin/env bash
# Builds Debian's LAMMPS source package (29Sep2021 update 2) with the packages OTF-Torch needs and
# installs lmp, liblammps, the LAMMPS headers and its CMake package into a cache folder outside the
# repository whose name encodes the configuration. A finished build is reused in seconds.
# Prints the install prefix on its last line.
set -euo pipefail
OTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lammps-config.sh
source "$OTF_ROOT/scripts/lammps-config.sh"

cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
prefix="$cache_root/$(lammps_config_key)"
jobs=${OTF_BUILD_JOBS:-$(nproc)}

if [[ -f "$prefix/.complete" ]]; then
  echo "LAMMPS: reusing $prefix" >&2
  echo "$prefix"
  exit 0
fi

log() { echo "LAMMPS: $*" >&2; }
work="$prefix.work"
rm -rf "$work"
mkdir -p "$work"

log "fetching Debian's source package into $work"
(cd "$work" && apt-get source -qq lammps >&2)
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'lammps-*' | head -n 1)
[[ -n $src && -f $src/src/version.h ]] || { log "apt-get source lammps gave no source tree"; exit 1; }
grep -q "\"$LAMMPS_EXPECTED_VERSION\"" "$src/src/version.h" &&
  grep -q "\"$LAMMPS_EXPECTED_UPDATE\"" "$src/src/version.h" || {
  log "expected LAMMPS $LAMMPS_EXPECTED_VERSION $LAMMPS_EXPECTED_UPDATE, found: $(grep -h '#define' "$src/src/version.h" | tr '\n' ' ')"
  exit 1
}

for patch_file in "$OTF_ROOT"/scripts/lammps-patches/*.patch; do
  log "applying $(basename "$patch_file")"
  patch -d "$src" -p1 --quiet <"$patch_file"
done

package_flags=()
for p in "${LAMMPS_PACKAGES[@]}"; do package_flags+=(-D "PKG_$p=on"); done

log "configuring (packages: ${LAMMPS_PACKAGES[*]})"
cmake -S "$src/cmake" -B "$work/build" -G "Unix Makefiles" \
  -D CMAKE_INSTALL_PREFIX="$prefix" -D CMAKE_INSTALL_LIBDIR=lib -D CMAKE_INSTALL_RPATH="$prefix/lib" \
  -D CMAKE_PROJECT_INCLUDE="$OTF_ROOT/cmake/FixDebianKokkos.cmake" \
  "${LAMMPS_CMAKE_OPTIONS[@]}" "${package_flags[@]}" >"$work/configure.log" 2>&1 ||
  { tail -n 40 "$work/configure.log" >&2; log "configure failed, full log: $work/configure.log"; exit 1; }

log "building with $jobs jobs (about 5 minutes on 2 cores)"
cmake --build "$work/build" --parallel "$jobs" >"$work/build.log" 2>&1 ||
  { grep -m 20 -B2 -A8 'error' "$work/build.log" >&2 || tail -n 40 "$work/build.log" >&2
    log "build failed, full log: $work/build.log"; exit 1; }
cmake --install "$work/build" >"$work/install.log" 2>&1

# Plugins compile against the class headers of the core and of every enabled package, as the
# LAMMPS build itself does; the CMake install copies only a few of them.
mkdir -p "$prefix/include/lammps"
cp "$src"/src/*.h "$prefix/include/lammps/"
cp -r "$src/src/fmt" "$prefix/include/lammps/fmt"    # utils.h and error.h use the bundled {fmt}
for p in "${LAMMPS_PACKAGES[@]}"; do
  [[ -d "$src/src/$p" ]] && cp "$src/src/$p"/*.h "$prefix/include/lammps/"
done
# Debian's potentials folder is the LAMMPS default; keep the source tree's copy for the examples.
mkdir -p "$prefix/share/lammps"
cp -r "$src/potentials" "$prefix/share/lammps/potentials"

"$prefix/bin/lmp" -h >"$prefix/lmp-help.txt"
for p in PLUGIN KOKKOS; do
  grep -qw "$p" "$prefix/lmp-help.txt" || { log "built lmp does not list package $p"; exit 1; }
done
rm -rf "$work"
touch "$prefix/.complete"
log "installed into $prefix"
echo "$prefix"

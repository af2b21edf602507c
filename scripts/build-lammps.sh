#!/usr/bin/env bash
# Builds the LAMMPS release that OTF_LAMMPS names (scripts/lammps-config.sh: 2021, 2025 or 2026) from
# Debian's source with the packages OTF-Torch needs, and installs lmp, liblammps, the LAMMPS headers
# and its CMake package into a cache folder outside the repository whose name encodes the
# configuration. A finished build is reused in seconds. Prints the install prefix on its last line.
set -euo pipefail
OTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lammps-config.sh
source "$OTF_ROOT/scripts/lammps-config.sh"
# shellcheck source=debian-pool.sh
source "$OTF_ROOT/scripts/debian-pool.sh"

cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
export OTF_TORCH_CACHE=$cache_root
jobs=${OTF_BUILD_JOBS:-$(nproc)}
log() { echo "LAMMPS: $*" >&2; }

# The Kokkos of its KOKKOS package first: it is part of the configuration.
kokkos_prefix="" kokkos_options=()
case "$LAMMPS_KOKKOS" in
  none) ;;
  debian)
    kokkos_prefix=/usr
    kokkos_options=(-D CMAKE_PROJECT_INCLUDE="$OTF_ROOT/cmake/FixDebianKokkos.cmake") ;;
  *)
    # The first version in LAMMPS_KOKKOS, LAMMPS_KOKKOS_FALLBACKS... whose source can be had.
    for candidate in "$LAMMPS_KOKKOS" "${LAMMPS_KOKKOS_FALLBACKS[@]}"; do
      status=0
      kokkos_prefix=$("$OTF_ROOT/scripts/build-kokkos.sh" "$candidate" "$LAMMPS_KOKKOS_BACKEND" | tail -n 1) || status=$?
      ((status == 3)) || break
    done
    if ((status == 0)); then LAMMPS_KOKKOS=$candidate; fi
    if ((status == 3)) && [[ $LAMMPS_KOKKOS_BACKEND == cuda ]]; then
      log "the CUDA flavour needs Kokkos $LAMMPS_KOKKOS's source (OTF_KOKKOS_SOURCE)"; exit 3
    elif ((status == 3)); then
      kokkos_prefix=""
      log "building LAMMPS $LAMMPS_EXPECTED_VERSION WITHOUT its KOKKOS package (no source of Kokkos ${LAMMPS_KOKKOS}${LAMMPS_KOKKOS_FALLBACKS[*]:+ or ${LAMMPS_KOKKOS_FALLBACKS[*]}}): pair_style otf/kk is left out"
    elif ((status != 0)); then
      exit "$status"
    else
      kokkos_options=(-D Kokkos_DIR="$kokkos_prefix/lib/cmake/Kokkos")
      # A CUDA Kokkos compiles everything that includes its headers with its nvcc_wrapper.
      if [[ $LAMMPS_KOKKOS_BACKEND == cuda ]]; then kokkos_options+=(-D CMAKE_CXX_COMPILER="$kokkos_prefix/bin/nvcc_wrapper"); fi
    fi ;;
esac
prefix="$cache_root/$(lammps_config_key "$kokkos_prefix")"
if [[ -n $kokkos_prefix ]]; then lammps_enable_kokkos; fi

if [[ -f "$prefix/.complete" ]]; then
  echo "LAMMPS: reusing $prefix" >&2
  echo "$prefix"
  exit 0
fi

work="$prefix.work"

# Unpacks and checks the source into $work, applies the patches and configures; sets src.
prepare_and_configure() {
  rm -rf "$work"
  mkdir -p "$work"

  case "$LAMMPS_SOURCE" in
    apt:*)
      log "fetching Debian's source package into $work"
      (cd "$work" && apt-get source -qq "${LAMMPS_SOURCE#apt:}" >&2) ;;
    pool:*)
      IFS=: read -r _ tarball checksum <<<"$LAMMPS_SOURCE"
      sources="$cache_root/sources"
      fetch_from_debian_pool log l/lammps "$tarball" "$checksum" "$sources" || exit 1
      # 4 Feb 2025 unpacks into lammps-4Feb2025/, 4 Jul 2026 into the current folder.
      mkdir -p "$work/lammps-source"
      tar -xf "$sources/$tarball" -C "$work/lammps-source" ;;
  esac
  version_header=$(find "$work" -maxdepth 4 -path '*/src/version.h' | head -n 1)
  src=${version_header%/src/version.h}
  [[ -n $src && -f $src/src/version.h ]] || { log "the source $LAMMPS_SOURCE gave no source tree"; exit 1; }
  grep -q "\"$LAMMPS_EXPECTED_VERSION\"" "$src/src/version.h" &&
    { [[ -z $LAMMPS_EXPECTED_UPDATE ]] || grep -q "\"$LAMMPS_EXPECTED_UPDATE\"" "$src/src/version.h"; } || {
    log "expected LAMMPS $LAMMPS_EXPECTED_VERSION $LAMMPS_EXPECTED_UPDATE, found: $(grep -h '#define' "$src/src/version.h" | tr '\n' ' ')"
    exit 1
  }

  for patch_name in "${LAMMPS_PATCHES[@]}"; do
    log "applying $patch_name"
    patch -d "$src" -p1 --quiet <"$OTF_ROOT/scripts/lammps-patches/$patch_name"
  done

  package_flags=()
  for p in "${LAMMPS_PACKAGES[@]}"; do package_flags+=(-D "PKG_$p=on"); done

  log "configuring (packages: ${LAMMPS_PACKAGES[*]})"
  cmake -S "$src/cmake" -B "$work/build" -G "Unix Makefiles" \
    -D CMAKE_INSTALL_PREFIX="$prefix" -D CMAKE_INSTALL_LIBDIR=lib -D CMAKE_INSTALL_RPATH="$prefix/lib${kokkos_prefix:+;$kokkos_prefix/lib}" \
    "${kokkos_options[@]}" "${LAMMPS_CMAKE_OPTIONS[@]}" "${package_flags[@]}" >"$work/configure.log" 2>&1 ||
    { tail -n 40 "$work/configure.log" >&2; log "configure failed, full log: $work/configure.log"; exit 1; }
  echo "$src" >"$work/.configured"
}

# The CUDA flavour compiles every file with nvcc, hours on 2 cores: an interrupted build of the
# same configuration (same folder name) resumes where it stopped.
if [[ $LAMMPS_KOKKOS_BACKEND == cuda && -f $work/.configured ]]; then
  log "resuming the build in $work"
  src=$(cat "$work/.configured")
else
  prepare_and_configure
fi

if [[ $LAMMPS_KOKKOS_BACKEND == cuda ]]; then
  log "building LAMMPS $LAMMPS_EXPECTED_VERSION for CUDA with $jobs jobs (every file through nvcc: hours on 2 cores; resumable)"
else
  log "building LAMMPS $LAMMPS_EXPECTED_VERSION with $jobs jobs (on 2 cores: 6 to 11 minutes, about 15 with KOKKOS)"
fi
cmake --build "$work/build" --parallel "$jobs" >"$work/build.log" 2>&1 ||
  { grep -m 20 -B2 -A8 'error' "$work/build.log" >&2 || tail -n 40 "$work/build.log" >&2
    log "build failed, full log: $work/build.log"; exit 1; }
cmake --install "$work/build" >"$work/install.log" 2>&1

# Plugins compile against the class headers of the core and of every enabled package, as the
# LAMMPS build itself does; the CMake install copies only a few of them.
mkdir -p "$prefix/include/lammps"
cp "$src"/src/*.h "$prefix/include/lammps/"
cp -r "$src/src/fmt" "$prefix/include/lammps/fmt"    # utils.h and error.h use the bundled {fmt}
# From 2026 atom.h includes LAMMPS' own JSON (namespace nlohmann_lmp, refusing direct inclusion):
# plugin sources that see LAMMPS' headers must not include Debian's <nlohmann/json.hpp>.
if [[ -d $src/src/nlohmann ]]; then cp -r "$src/src/nlohmann" "$prefix/include/lammps/nlohmann"; fi
for p in "${LAMMPS_PACKAGES[@]}"; do
  [[ -d "$src/src/$p" ]] && cp "$src/src/$p"/*.h "$prefix/include/lammps/"
done
# Debian's potentials folder is the LAMMPS default; keep the source tree's copy for the examples.
mkdir -p "$prefix/share/lammps"
cp -r "$src/potentials" "$prefix/share/lammps/potentials"

# The Kokkos of the KOKKOS package, for the plugin's build (scripts/setup.sh).
if [[ -n $kokkos_prefix && $kokkos_prefix != /usr ]]; then echo "$kokkos_prefix/lib/cmake/Kokkos" >"$prefix/kokkos-dir.txt"; fi
"$prefix/bin/lmp" -h >"$prefix/lmp-help.txt"
for p in PLUGIN ${kokkos_prefix:+KOKKOS}; do
  grep -qw "$p" "$prefix/lmp-help.txt" || { log "built lmp does not list package $p"; exit 1; }
done
rm -rf "$work"
touch "$prefix/.complete"
log "installed into $prefix"
echo "$prefix"

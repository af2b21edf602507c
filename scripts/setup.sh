#!/usr/bin/env bash
# One-command set-up of OTF-Torch on Debian 12 (as root, or with sudo):
#   scripts/setup.sh example   install packages, build LAMMPS (cached), build the plugin, run the main example
#   scripts/setup.sh test      the same, then run every test (unit and LAMMPS integration) with CTest
#   scripts/setup.sh build     the same, stopping after the build
# Environment: OTF_TORCH_CACHE (cache folder, default ~/.cache/otf-torch), OTF_BUILD_DIR (default build),
#              OTF_BUILD_JOBS (default: all cores), OTF_CMAKE_ARGS (extra arguments for the project's CMake).
set -euo pipefail
OTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$OTF_ROOT"
action=${1:-build}
case "$action" in example|test|build) ;; *) echo "usage: $0 example|test|build" >&2; exit 2 ;; esac

say() { echo "== OTF-Torch setup: $*" >&2; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# LibTorch's float32 needs OpenBLAS (the OpenMP variant obeys the per-rank thread count) instead of
# Debian's reference BLAS; ccache makes a rebuild from a fresh clone fast.
packages=(build-essential cmake g++ patch dpkg-dev xz-utils python3 ccache
          libtorch-dev libtrilinos-kokkos-dev libgtest-dev libopenmpi-dev openmpi-bin
          libopenblas0-openmp lammps-data nlohmann-json3-dev procps
          python3-ase python3-matplotlib cp2k cp2k-data)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
apt_updated=0
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  apt_updated=1
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# LAMMPS is built from Debian's own source package, which needs deb-src entries.
source "$OTF_ROOT/scripts/lammps-config.sh"
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
export OTF_TORCH_CACHE=$cache_root
if [[ ! -f "$cache_root/$(lammps_config_key)/.complete" ]]; then
  if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    say "enabling Debian source packages (/etc/apt/sources.list.d/otf-torch-deb-src.sources)"
    as_root tee /etc/apt/sources.list.d/otf-torch-deb-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt_updated=0
  fi
  ((apt_updated)) || as_root apt-get update -qq
fi
lammps_prefix=$("$OTF_ROOT/scripts/build-lammps.sh" | tail -n 1)

build_dir=${OTF_BUILD_DIR:-$OTF_ROOT/build}
jobs=${OTF_BUILD_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$cache_root/ccache}
# Paths relative to the clone, so a fresh clone in another folder (as CI makes) hits the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$OTF_ROOT} CCACHE_NOHASHDIR=1
mkdir -p "$build_dir"
say "building OTF-Torch in $build_dir against $lammps_prefix"
# shellcheck disable=SC2086
cmake -S "$OTF_ROOT" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DLAMMPS_ROOT="$lammps_prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache ${OTF_CMAKE_ARGS:-} >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log" >&2; exit 1; }
cmake --build "$build_dir" --parallel "$jobs"
cmake --install "$build_dir" --prefix "$build_dir/install" >/dev/null

case "$action" in
  example)
    say "running the main example (examples/si-sw: silicon learned from Stillinger-Weber during MD)"
    cd "$OTF_ROOT/examples/si-sw"
    LAMMPS_PLUGIN_PATH="$build_dir/install/lib/lammps/plugins" OMP_NUM_THREADS="${OMP_NUM_THREADS:-$jobs}" \
      LMP="$lammps_prefix/bin/lmp" bash run.sh
    ;;
  test)
    say "running all tests"
    ctest --test-dir "$build_dir" --output-on-failure --parallel "$jobs"
    ;;
esac

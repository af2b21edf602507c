#!/usr/bin/env bash
# One-command set-up of OTF-Torch on Debian 12 (as root, or with sudo):
#   scripts/setup.sh example   install packages, build LAMMPS (cached), build the plugin, run the main example
#   scripts/setup.sh test      the same, then run every test (unit and LAMMPS integration) with CTest,
#                              then the LAMMPS integration tests against each release of OTF_TEST_LAMMPS
#   scripts/setup.sh build     the same, stopping after the build
# Configuration (README "Supported versions"):
#   OTF_CONFIG     current (default): LAMMPS 4 Feb 2025 (with KOKKOS: Kokkos 4.6.01 where its source
#                  can be had, else 4.5.01 from PyPI; scripts/build-kokkos.sh) and LibTorch 2.15.0 from PyPI;
#                  debian12: LAMMPS 29 Sep 2021, Kokkos 3.4 and LibTorch 1.13, all from Debian 12
#   OTF_LAMMPS     2021 | 2025 | 2026, overrides the configuration's LAMMPS (scripts/lammps-config.sh)
#   OTF_LIBTORCH   debian | 2.15.0, overrides the configuration's LibTorch (2.x: CPU LibTorch from
#                  PyPI's torch wheel, scripts/fetch-libtorch.sh; OTF_TORCH_WHEELS: downloaded wheels)
#   OTF_TEST_LAMMPS  releases whose LAMMPS integration tests `test` also runs, built against the same
#                  LibTorch (default with current: "2021 2026"; with debian12: none; "" for none)
# Environment: OTF_TORCH_CACHE (cache folder, default ~/.cache/otf-torch), OTF_BUILD_DIR (default build),
#              OTF_BUILD_JOBS (default: all cores), OTF_CMAKE_ARGS (extra arguments for the project's CMake),
#              OTF_KOKKOS_SOURCE (a Kokkos release tarball, see scripts/build-kokkos.sh).
set -euo pipefail
OTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$OTF_ROOT"
action=${1:-build}
case "$action" in example|test|build) ;; *) echo "usage: $0 example|test|build" >&2; exit 2 ;; esac

say() { echo "== OTF-Torch setup: $*" >&2; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

case "${OTF_CONFIG:=current}" in
  current) default_lammps=2025 default_libtorch=2.15.0 default_matrix="2021 2026" ;;
  debian12) default_lammps=2021 default_libtorch=debian default_matrix="" ;;
  *) echo "OTF_CONFIG=$OTF_CONFIG: accepted values are current and debian12" >&2; exit 2 ;;
esac
export OTF_LAMMPS=${OTF_LAMMPS:-$default_lammps}
libtorch=${OTF_LIBTORCH:-$default_libtorch}
case "$libtorch" in debian | 2.*) ;; *)
  echo "OTF_LIBTORCH=$libtorch: accepted values are debian and a LibTorch 2.x version (2.15.0)" >&2; exit 2 ;;
esac
matrix=()
if [[ $action == test ]]; then
  read -r -a matrix <<<"${OTF_TEST_LAMMPS-$default_matrix}"
fi

# LibTorch's float32 needs OpenBLAS (the OpenMP variant obeys the per-rank thread count) instead of
# Debian's reference BLAS; ccache makes a rebuild from a fresh clone fast.
packages=(build-essential cmake g++ patch dpkg-dev xz-utils curl python3 ccache
          libtrilinos-kokkos-dev libgtest-dev libopenmpi-dev openmpi-bin
          libopenblas0-openmp lammps-data nlohmann-json3-dev procps
          python3-ase python3-matplotlib cp2k cp2k-data
          python3-dev pybind11-dev)   # the Python module otf_torch (docs/python-module.md)
[[ $libtorch == debian ]] && packages+=(libtorch-dev)
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

cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
export OTF_TORCH_CACHE=$cache_root
jobs=${OTF_BUILD_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$cache_root/ccache}
# Paths relative to the clone, so a fresh clone in another folder (as CI makes) hits the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$OTF_ROOT} CCACHE_NOHASHDIR=1
# What ccache needs to cache the precompiled <torch/torch.h> of LibTorch 2.x builds (cmake/OTFPrecompiledTorch.cmake).
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}

# LAMMPS 29 Sep 2021 is built from Debian 12's own source package, which needs deb-src entries.
enable_debian_sources() {
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
  ((apt_updated)) || { as_root apt-get update -qq; apt_updated=1; }
}

# Builds (or reuses) the LAMMPS release $1; prints its install prefix.
lammps_prefix_for() {
  local release=$1
  if [[ $release == 2021 && ! -f $cache_root/$(OTF_LAMMPS=2021 && source "$OTF_ROOT/scripts/lammps-config.sh" &&
                                                lammps_config_key /usr)/.complete ]]; then
    enable_debian_sources
  fi
  OTF_LAMMPS=$release "$OTF_ROOT/scripts/build-lammps.sh" | tail -n 1
}

torch_args=()
if [[ $libtorch != debian ]]; then
  [[ -x $OTF_ROOT/scripts/fetch-libtorch.sh ]] ||
    { echo "OTF_LIBTORCH=$libtorch: scripts/fetch-libtorch.sh is missing or not executable" >&2; exit 2; }
  torch_prefix=$("$OTF_ROOT/scripts/fetch-libtorch.sh" "$libtorch" | tail -n 1)
  torch_args=(-DTorch_DIR="$torch_prefix/share/cmake/Torch")
fi

# Configures and builds OTF-Torch in $2 against the LAMMPS at $1 (extra CMake arguments follow).
build_otf() {
  local lammps_prefix=$1 build_dir=$2
  shift 2
  local kokkos_args=()
  # The Kokkos that LAMMPS was built with (build-lammps.sh records it), else Debian's.
  if [[ -s $lammps_prefix/kokkos-dir.txt ]]; then kokkos_args=(-DKokkos_DIR="$(cat "$lammps_prefix/kokkos-dir.txt")"); fi
  mkdir -p "$build_dir"
  say "building OTF-Torch in $build_dir against $lammps_prefix (LibTorch: $libtorch)"
  # shellcheck disable=SC2086
  cmake -S "$OTF_ROOT" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DLAMMPS_ROOT="$lammps_prefix" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${torch_args[@]}" "${kokkos_args[@]}" "$@" ${OTF_CMAKE_ARGS:-} \
    >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }
  cmake --build "$build_dir" --parallel "$jobs"
}

lammps_prefix=$(lammps_prefix_for "$OTF_LAMMPS")
build_dir=${OTF_BUILD_DIR:-$OTF_ROOT/build}
# Headers of LAMMPS 4 Jul 2026 and Kokkos 5.2 for the otf/kk compile checks (tests/CMakeLists.txt).
kk_check_args=()
if kk_headers=$(bash "$OTF_ROOT/scripts/check-otf-kk-compile.sh" prepare | tail -n 1); then
  kk_check_args=(-DOTF_KK_HEADERS="$kk_headers")
else
  say "WARNING: no LAMMPS 2026 / Kokkos 5.2 headers: the otf/kk compile checks are left out"
fi
# otf/kk's CUDA instantiation against LAMMPS 4 Feb 2025 and a real CUDA Kokkos, the first of that
# LAMMPS' Kokkos versions (scripts/lammps-config.sh: 4.6.01, then 4.5.01 from PyPI) whose source can
# be had, built here for Hopper with the machine's nvcc (minutes; cached): the otf/kk of the GPU
# check (bench/gpu/). `test` only: nothing else needs it.
if [[ $action == test ]] && command -v nvcc >/dev/null; then
  read -r -a cuda_kokkos_versions <<<"$(OTF_LAMMPS=2025 OTF_KOKKOS_BACKEND=cuda bash -c \
    "source '$OTF_ROOT/scripts/lammps-config.sh' && echo \"\$LAMMPS_KOKKOS \${LAMMPS_KOKKOS_FALLBACKS[*]}\"")"
  for kokkos_version in "${cuda_kokkos_versions[@]}"; do
    status=0
    cuda_kokkos=$("$OTF_ROOT/scripts/build-kokkos.sh" "$kokkos_version" cuda | tail -n 1) || status=$?
    if ((status == 0)); then kk_check_args+=(-DOTF_KK_CUDA_KOKKOS="$cuda_kokkos"); break; fi
    ((status == 3)) || { say "building Kokkos $kokkos_version for CUDA failed"; exit 1; }
  done
  ((status == 0)) || say "WARNING: no Kokkos source for CUDA: otf_kk_compile_cuda_kokkos4 is left out"
fi
build_otf "$lammps_prefix" "$build_dir" "${kk_check_args[@]}"
cmake --install "$build_dir" --prefix "$build_dir/install" >/dev/null

case "$action" in
  example)
    say "running the main example (examples/si-sw: silicon learned from Stillinger-Weber during MD)"
    cd "$OTF_ROOT/examples/si-sw"
    LAMMPS_PLUGIN_PATH="$build_dir/install/lib/lammps/plugins" OMP_NUM_THREADS="${OMP_NUM_THREADS:-$jobs}" \
      LAMMPS_POTENTIALS="${LAMMPS_POTENTIALS:-$lammps_prefix/share/lammps/potentials}" \
      LMP="$lammps_prefix/bin/lmp" bash run.sh
    ;;
  test)
    say "running all tests (LAMMPS $OTF_LAMMPS, LibTorch $libtorch)"
    status=0
    ctest --test-dir "$build_dir" --output-on-failure --parallel "$jobs" || status=1
    for release in "${matrix[@]}"; do
      say "LAMMPS integration tests against LAMMPS $release"
      other_build="$build_dir-lammps$release"
      build_otf "$(lammps_prefix_for "$release")" "$other_build" -DOTF_BUILD_UNIT_TESTS=OFF -DOTF_BUILD_PYTHON=OFF
      ctest --test-dir "$other_build" -L lammps --output-on-failure --parallel "$jobs" || status=1
    done
    exit "$status"
    ;;
esac

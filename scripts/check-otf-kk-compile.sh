#!/usr/bin/env bash
# Compiles pair_style otf/kk against the KOKKOS package of LAMMPS 4 Jul 2026 (its redesigned
# TransformView types) and Kokkos 5.2, for releases and back ends that cannot be built and run here
# (issue 15): sid's kokkos source is not served, so the headers come from LAMMPS' source tarball
# and sid's libkokkos-dev binary package (built for OpenMP), unpacked. Nothing is linked or run.
#
#   scripts/check-otf-kk-compile.sh prepare   download and unpack the headers into the cache (setup.sh
#                                             runs it; the checks themselves stay offline)
#   scripts/check-otf-kk-compile.sh host      g++, Kokkos' OpenMP space, LAMMPS in double and in mixed
#                                             precision (KOKKOS_PREC, where otf/kk must refuse cleanly)
#   scripts/check-otf-kk-compile.sh cuda      nvcc from PATH, Kokkos' Cuda space for Hopper (sm_90):
#                                             Kokkos' configuration header is edited to enable Cuda,
#                                             as a CUDA build of Kokkos 5.2 would generate it
#   scripts/check-otf-kk-compile.sh cuda-kokkos4 PREFIX
#                                             the same against LAMMPS 4 Feb 2025's KOKKOS headers and
#                                             a real CUDA Kokkos 4.x install (scripts/build-kokkos.sh
#                                             4.6.01|4.5.01 cuda, patched for CUDA 13), compiled as
#                                             the plugin's build does, through its nvcc_wrapper: the
#                                             otf/kk of the device check (bench/gpu/, issue 19)
# Prints the headers' folder (prepare) or "otf/kk compiles ..." (host, cuda); exit 0 when it did.
# Kokkos 4.5.01 and 4.6.01 as released do not compile with CUDA 13's runtime API (cudaGraphAddDependencies,
# cudaMemAdvise changed signatures), so the `cuda` check uses Kokkos 5.2's headers and the
# `cuda-kokkos4` check a patched build (docs/lammps-versions.md).
set -euo pipefail
OTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
say() { printf 'check-otf-kk-compile: %s\n' "$*" >&2; }

# Pinned: sid's package (pool/main/k/kokkos) and LAMMPS 4 Jul 2026 (as in lammps-config.sh).
kokkos_deb=libkokkos-dev_5.2.2-2_amd64.deb
kokkos_deb_sha256=4a8f580267c100400c53cad45b5b7962cf0343df0fe7b1ab00ffcbd0f929d1a7
lammps_tarball=lammps_20260704+dfsg.orig.tar.gz
lammps_sha256=cddbc45a047416bd48a4a0b87f24a5b61b3446982b74d18cafe619c22b17eb62
headers=${OTF_KK_HEADERS:-$cache_root/otf-kk-headers-lammps20260704-kokkos5.2.2}

# shellcheck source=debian-pool.sh
source "$OTF_ROOT/scripts/debian-pool.sh"

prepare() {
  if [[ -f $headers/.complete ]]; then echo "$headers"; return; fi
  fetch_from_debian_pool say k/kokkos "$kokkos_deb" "$kokkos_deb_sha256" "$cache_root/sources"
  fetch_from_debian_pool say l/lammps "$lammps_tarball" "$lammps_sha256" "$cache_root/sources"
  rm -rf "$headers" "$headers.work"
  mkdir -p "$headers.work/deb" "$headers.work/lammps"
  dpkg -x "$cache_root/sources/$kokkos_deb" "$headers.work/deb"
  mv "$headers.work/deb/usr/include/kokkos" "$headers.work/kokkos"
  # Only the headers of the core and of the packages otf/kk sees (the tarball has no top folder).
  tar -xzf "$cache_root/sources/$lammps_tarball" -C "$headers.work/lammps" --wildcards --no-wildcards-match-slash \
    'src/*.h' 'src/fmt/*' 'src/nlohmann/*' 'src/KOKKOS/*.h' 'src/MANYBODY/*.h'
  rm -rf "$headers.work/deb"
  mv "$headers.work" "$headers"
  touch "$headers/.complete"
  echo "$headers"
}

# The compiler flags every check shares: the plugin's sources and a LAMMPS release's headers
# (default: 4 Jul 2026's; $1 folder, $2 version id, $3 version string).
common_flags() {
  local lammps=${1:-$headers/lammps/src} id=${2:-20260704} version=${3:-4 Jul 2026}
  printf '%s\n' -DLMP_KOKKOS -DOTF_WITH_KOKKOS -DLAMMPS_SMALLBIG -DOTF_LAMMPS_API_VERSION="$id" \
    -DOTF_LAMMPS_VERSION_ID="$id" "-DOTF_LAMMPS_VERSION_STRING=\"$version\"" '-DOTF_VERSION="check"' \
    -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX \
    -I"$OTF_ROOT/lammps-plugin" -I"$OTF_ROOT/potentials" -I"$OTF_ROOT/src" -I"$OTF_ROOT/training" \
    -isystem "$lammps" -isystem "$lammps/KOKKOS" -isystem "$lammps/MANYBODY"
  local mpi_dir
  for mpi_dir in $(mpicxx --showme:incdirs); do printf '%s\n' -isystem "$mpi_dir"; done
}

check_host() {
  local work=$1 flags precision
  mapfile -t flags < <(common_flags)
  # The views must be taken for the plain arrays in double precision, and not in mixed.
  cat >"$work/host.cpp" <<PROBE
#include "$OTF_ROOT/lammps-plugin/pair_otf_kokkos.cpp"
static_assert(std::is_same<LMPDeviceType, Kokkos::OpenMP>::value, "not an OpenMP build");
#ifdef LMP_KOKKOS_DOUBLE_DOUBLE
static_assert(views_are_host_arrays<LMPDeviceType>(), "host views not taken for host arrays");
#else
static_assert(!views_are_double<LMPDeviceType>(), "single-precision views taken for double");
#endif
PROBE
  for precision in DOUBLE_DOUBLE SINGLE_DOUBLE; do
    say "g++ $(g++ -dumpfullversion): otf/kk for Kokkos $(kokkos_version) OpenMP, KOKKOS precision $precision"
    g++ -std=c++20 -fopenmp -Wall -Wextra -Werror -DLMP_KOKKOS_$precision "${flags[@]}" \
      -isystem "$headers/kokkos" -c "$work/host.cpp" -o "$work/host-$precision.o"
  done
  echo "otf/kk compiles against LAMMPS 4 Jul 2026 KOKKOS with Kokkos $(kokkos_version) (OpenMP; double and mixed precision)"
}

check_cuda() {
  local work=$1 flags nvcc overlay=$1/include kokkos=$headers/kokkos part name header file
  nvcc=${NVCC:-$(command -v nvcc || true)}
  [[ -n $nvcc ]] || { say "needs nvcc on PATH (the CUDA toolkit)"; exit 2; }
  mapfile -t flags < <(common_flags)
  mkdir -p "$overlay/desul/atomics"
  sed -e 's|/\* #undef KOKKOS_ENABLE_CUDA \*/|#define KOKKOS_ENABLE_CUDA|' \
      -e 's|/\* #undef KOKKOS_ENABLE_CUDA_CONSTEXPR \*/|#define KOKKOS_ENABLE_CUDA_CONSTEXPR|' \
      -e 's|/\* #undef KOKKOS_ARCH_HOPPER \*/|#define KOKKOS_ARCH_HOPPER|' \
      -e 's|/\* #undef KOKKOS_ARCH_HOPPER90 \*/|#define KOKKOS_ARCH_HOPPER90|' \
      "$kokkos/KokkosCore_config.h" >"$overlay/KokkosCore_config.h"
  sed -e 's|/\* #undef DESUL_ATOMICS_ENABLE_CUDA \*/|#define DESUL_ATOMICS_ENABLE_CUDA|' \
      "$kokkos/desul/atomics/Config.hpp" >"$overlay/desul/atomics/Config.hpp"
  grep -q '^#define KOKKOS_ENABLE_CUDA$' "$overlay/KokkosCore_config.h" &&
    grep -q '^#define DESUL_ATOMICS_ENABLE_CUDA$' "$overlay/desul/atomics/Config.hpp" ||
    { say "could not enable the Cuda back end in Kokkos' configuration headers"; exit 1; }
  for part in Fwd:fwd/Kokkos_Fwd_CUDA.hpp Declare:decl/Kokkos_Declare_CUDA.hpp Setup:setup/Kokkos_Setup_Cuda.hpp; do
    name=${part%%:*} header=${part#*:}
    file=KokkosCore_Config_${name}Backend.hpp
    # The generated file lists one include per back end inside its include guard.
    awk -v add="#include <$header>" '/^#endif/ && !done { print add; done = 1 } { print }' \
      "$kokkos/$file" >"$overlay/$file"
  done
  # Proof that this is the CUDA instantiation: the device type is Cuda, distinct from the host
  # type, and its views are not host arrays (the resident path is taken).
  cat >"$work/cuda.cu" <<PROBE
#include "$OTF_ROOT/lammps-plugin/pair_otf_kokkos.cpp"
static_assert(std::is_same<LMPDeviceType, Kokkos::Cuda>::value, "not a Cuda build");
static_assert(!std::is_same<LMPDeviceType, LMPHostType>::value, "no host variant");
static_assert(!views_are_host_arrays<LMPDeviceType>(), "device views taken for host arrays");
static_assert(views_are_host_arrays<LMPHostType>(), "host views not taken for host arrays");
PROBE
  say "$("$nvcc" --version | tail -1): otf/kk for Kokkos $(kokkos_version) Cuda (sm_90) and its host space"
  "$nvcc" -std=c++20 -arch=sm_90 --expt-extended-lambda --expt-relaxed-constexpr -Xcompiler -fopenmp \
    "${flags[@]}" -I"$overlay" -I"$kokkos" -c "$work/cuda.cu" -o "$work/cuda.o"
  echo "otf/kk compiles for a CUDA Kokkos ($("$nvcc" --version | grep -o 'release [0-9.]*'), Kokkos $(kokkos_version), LAMMPS 4 Jul 2026, sm_90)"
}

# otf/kk against LAMMPS 4 Feb 2025 and an installed CUDA Kokkos 4.x ($2), through its nvcc_wrapper.
check_cuda_kokkos4() {
  local work=$1 prefix=$2 flags wrapper config
  wrapper=$prefix/bin/nvcc_wrapper config=$prefix/include/KokkosCore_config.h
  [[ -x $wrapper ]] && grep -q '^#define KOKKOS_ENABLE_CUDA$' "$config" ||
    { say "$prefix is not a CUDA Kokkos install (scripts/build-kokkos.sh 4.5.01 cuda)"; exit 2; }
  # LAMMPS 4 Feb 2025's headers of the core and of the packages otf/kk sees (pinned in lammps-config.sh).
  local tarball
  tarball=$(OTF_LAMMPS=2025 bash -c "source '$OTF_ROOT/scripts/lammps-config.sh' && echo \"\$LAMMPS_SOURCE\"" | cut -d: -f2)
  [[ -f $cache_root/sources/$tarball ]] || { say "no $tarball in $cache_root/sources (scripts/build-lammps.sh fetches it)"; exit 2; }
  tar -xJf "$cache_root/sources/$tarball" -C "$work" --wildcards --no-wildcards-match-slash \
    'lammps-4Feb2025/src/*.h' 'lammps-4Feb2025/src/fmt/*' 'lammps-4Feb2025/src/KOKKOS/*.h' 'lammps-4Feb2025/src/MANYBODY/*.h'
  mapfile -t flags < <(common_flags "$work/lammps-4Feb2025/src" 20250204 "4 Feb 2025")
  cat >"$work/cuda.cpp" <<PROBE
#include "$OTF_ROOT/lammps-plugin/pair_otf_kokkos.cpp"
static_assert(std::is_same<LMPDeviceType, Kokkos::Cuda>::value, "not a Cuda build");
static_assert(!views_are_host_arrays<LMPDeviceType>(), "device views taken for host arrays");
static_assert(views_are_host_arrays<LMPHostType>(), "host views not taken for host arrays");
PROBE
  local version
  version=$(sed -n 's/^#define KOKKOS_VERSION \([0-9]*\)$/\1/p' "$config")
  version="$((version / 10000)).$((version / 100 % 100)).$((version % 100))"
  say "$(nvcc --version | tail -1): otf/kk for Kokkos $version Cuda through $wrapper"
  "$wrapper" -std=c++20 -O1 -extended-lambda "${flags[@]}" -isystem "$prefix/include" -c "$work/cuda.cpp" -o "$work/cuda.o"
  echo "otf/kk compiles for a CUDA Kokkos ($(nvcc --version | grep -o 'release [0-9.]*'), Kokkos $version built here, LAMMPS 4 Feb 2025)"
}

kokkos_version() {
  local v
  v=$(sed -n 's/^#define KOKKOS_VERSION \([0-9]*\)$/\1/p' "$headers/kokkos/KokkosCore_config.h")
  echo "$((v / 10000)).$((v / 100 % 100)).$((v % 100))"
}

case "${1:-}" in
  prepare) prepare ;;
  host | cuda)
    [[ -f $headers/.complete ]] || { say "run '$0 prepare' first (scripts/setup.sh does)"; exit 2; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "check_$1" "$work" ;;
  cuda-kokkos4)
    [[ -n ${2:-} ]] || { echo "usage: $0 cuda-kokkos4 KOKKOS_PREFIX" >&2; exit 2; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    check_cuda_kokkos4 "$work" "$2" ;;
  *) echo "usage: $0 prepare|host|cuda|cuda-kokkos4 PREFIX" >&2; exit 2 ;;
esac

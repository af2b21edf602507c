# The one description of the LAMMPS builds that OTF-Torch supports; sourced by the setup scripts.
# OTF_LAMMPS picks the release (default: 2021, as scripts/setup.sh's default configuration). Changing anything here changes the cache folder
# name, so an old build is never reused by mistake.
#   2021  LAMMPS 29 Sep 2021 update 2, Debian 12's source package (apt-get source), with the
#         plugin auto-load backport and Debian's Kokkos 3.4 (Trilinos).
#   2025  LAMMPS 4 Feb 2025, Debian trixie's source (20250204+dfsg.1), with Kokkos 4.6.01 built by
#         scripts/build-kokkos.sh when its source can be had, else Kokkos 4.5.01 (the oldest this
#         LAMMPS accepts; PyPI serves its source), otherwise without KOKKOS. OTF_KOKKOS_VERSION
#         names one version and turns the fallback off.
#   2026  LAMMPS 4 Jul 2026, Debian sid's source (20260704+dfsg), without KOKKOS: its KOKKOS needs
#         Kokkos 5.1 or newer, whose source is served nowhere here (docs/lammps-versions.md).
# OTF_KOKKOS_BACKEND=cuda (2025 only) builds the GPU flavour instead: KOKKOS for CUDA (Kokkos built
# by scripts/build-kokkos.sh with the nvcc on PATH, for OTF_KOKKOS_CUDA_ARCH, default HOPPER90),
# only the packages the device check needs (PLUGIN, MANYBODY, KOKKOS), no OpenMP and no image
# libraries, every source compiled through Kokkos' nvcc_wrapper (issue 19, bench/gpu/).
# Debian's .dsc files of the newer suites answer 404 on some mirrors while the .orig tarballs
# download, so those come straight from the pool and are checked against the suites' Sources
# index (the sha256 below). Debian's own patches of these releases touch only docs and the
# potentials path.
OTF_LAMMPS=${OTF_LAMMPS:-2021}
LAMMPS_PACKAGES=(PLUGIN MANYBODY EXTRA-FIX ML-SNAP OPENMP)
LAMMPS_CMAKE_OPTIONS=(
  -D BUILD_SHARED_LIBS=on
  -D BUILD_MPI=on
  -D BUILD_OMP=on
  -D CMAKE_BUILD_TYPE=Release
)
LAMMPS_PATCHES=()
LAMMPS_KOKKOS=none    # debian | a kokkos/kokkos release version | none
LAMMPS_KOKKOS_FALLBACKS=()   # release versions to try, in order, when LAMMPS_KOKKOS' source is missing
LAMMPS_KOKKOS_BACKEND=${OTF_KOKKOS_BACKEND:-serial}
case "$LAMMPS_KOKKOS_BACKEND" in serial | cuda) ;; *)
  echo "OTF_KOKKOS_BACKEND=$LAMMPS_KOKKOS_BACKEND: accepted values are serial and cuda" >&2
  return 2 2>/dev/null || exit 2 ;;
esac
case "$OTF_LAMMPS" in
  2021)
    LAMMPS_EXPECTED_VERSION="29 Sep 2021"
    LAMMPS_EXPECTED_UPDATE="Update 2"
    LAMMPS_SOURCE=apt:lammps
    LAMMPS_PATCHES=(plugin-auto-load.patch)
    LAMMPS_KOKKOS=debian
    LAMMPS_CMAKE_OPTIONS+=(-D LAMMPS_EXCEPTIONS=on)
    ;;
  2025)
    LAMMPS_EXPECTED_VERSION="4 Feb 2025"
    LAMMPS_EXPECTED_UPDATE=""
    LAMMPS_SOURCE=pool:lammps_20250204+dfsg.1.orig.tar.xz:3671165bd52fad36734e0a9136c5bc5ecb225e03988f8c89aa13366a8b53b1c7
    LAMMPS_KOKKOS=${OTF_KOKKOS_VERSION:-4.6.01}
    if [[ -z ${OTF_KOKKOS_VERSION:-} ]]; then LAMMPS_KOKKOS_FALLBACKS=(4.5.01); fi
    ;;
  2026)
    LAMMPS_EXPECTED_VERSION="4 Jul 2026"
    LAMMPS_EXPECTED_UPDATE=""
    LAMMPS_SOURCE=pool:lammps_20260704+dfsg.orig.tar.gz:cddbc45a047416bd48a4a0b87f24a5b61b3446982b74d18cafe619c22b17eb62
    ;;
  *)
    echo "OTF_LAMMPS=$OTF_LAMMPS: accepted values are 2021, 2025 and 2026" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
if [[ $LAMMPS_KOKKOS_BACKEND == cuda ]]; then
  # 2021's KOKKOS needs Debian's Kokkos 3.4 (no CUDA); 2026's needs Kokkos 5.1+, not served here.
  [[ $OTF_LAMMPS == 2025 ]] || {
    echo "OTF_KOKKOS_BACKEND=cuda: only OTF_LAMMPS=2025 (Kokkos 4.6.01 or 4.5.01) has a CUDA build here" >&2
    return 2 2>/dev/null || exit 2; }
  LAMMPS_PACKAGES=(PLUGIN MANYBODY)
  LAMMPS_CMAKE_OPTIONS=(-D BUILD_SHARED_LIBS=on -D BUILD_MPI=on -D BUILD_OMP=off -D CMAKE_BUILD_TYPE=Release
                        -D WITH_JPEG=off -D WITH_PNG=off -D WITH_GZIP=off -D WITH_FFMPEG=off)
fi

# The packages and options with the KOKKOS package, built against an external Kokkos.
lammps_enable_kokkos() {
  LAMMPS_PACKAGES+=(KOKKOS)
  LAMMPS_CMAKE_OPTIONS+=(-D EXTERNAL_KOKKOS=on -D Kokkos_ENABLE_SERIAL=on)
}

# $1: the Kokkos install prefix ("" without KOKKOS). Prints the cache folder name.
lammps_config_key() (
  local kokkos_prefix=${1:-}
  if [[ -n $kokkos_prefix ]]; then lammps_enable_kokkos; fi
  local compiler_version kokkos_tag flavour=mpi-omp
  compiler_version=$(${CXX:-c++} -dumpfullversion 2>/dev/null || echo unknown)
  case "$LAMMPS_KOKKOS:$kokkos_prefix" in
    none:* | *:) kokkos_tag=nokokkos ;;
    debian:*) kokkos_tag="kokkos-trilinos$(dpkg-query -W -f='${Version}' libtrilinos-kokkos-dev 2>/dev/null | cut -d- -f1)" ;;
    *) kokkos_tag="kokkos$LAMMPS_KOKKOS" ;;
  esac
  # The CUDA flavour: its Kokkos prefix (part of the digest) names the CUDA version and architecture.
  if [[ $LAMMPS_KOKKOS_BACKEND == cuda ]]; then flavour=mpi-cuda; fi
  local digest
  digest=$(printf '%s\n' "$OTF_LAMMPS" "$LAMMPS_SOURCE" "${LAMMPS_PACKAGES[@]}" "${LAMMPS_CMAKE_OPTIONS[@]}" \
             "$compiler_version" "$kokkos_prefix" "$(cat "$OTF_ROOT/cmake/FixDebianKokkos.cmake")" \
             "$(for p in "${LAMMPS_PATCHES[@]}"; do cat "$OTF_ROOT/scripts/lammps-patches/$p"; done)" |
             sha256sum | cut -c1-10)
  echo "lammps-${LAMMPS_EXPECTED_VERSION// /}-${flavour}-${kokkos_tag}-gcc${compiler_version}-${digest}"
)

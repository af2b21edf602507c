# The one description of the LAMMPS build that OTF-Torch needs; sourced by the setup scripts.
# Changing anything here changes the cache folder name, so an old build is never reused by mistake.
LAMMPS_EXPECTED_VERSION="29 Sep 2021"
LAMMPS_EXPECTED_UPDATE="Update 2"
LAMMPS_PACKAGES=(PLUGIN KOKKOS MANYBODY EXTRA-FIX ML-SNAP OPENMP)
LAMMPS_CMAKE_OPTIONS=(
  -D BUILD_SHARED_LIBS=on
  -D BUILD_MPI=on
  -D BUILD_OMP=on
  -D LAMMPS_EXCEPTIONS=on
  -D EXTERNAL_KOKKOS=on
  -D Kokkos_ENABLE_SERIAL=on
  -D CMAKE_BUILD_TYPE=Release
)
lammps_config_key() {
  local compiler_version
  compiler_version=$(${CXX:-c++} -dumpfullversion 2>/dev/null || echo unknown)
  local kokkos_version
  kokkos_version=$(dpkg-query -W -f='${Version}' libtrilinos-kokkos-dev 2>/dev/null || echo none)
  local digest
  digest=$(printf '%s\n' "${LAMMPS_PACKAGES[@]}" "${LAMMPS_CMAKE_OPTIONS[@]}" "$compiler_version" \
             "$kokkos_version" "$(cat "$OTF_ROOT/cmake/FixDebianKokkos.cmake" "$OTF_ROOT"/scripts/lammps-patches/*.patch)" | sha256sum | cut -c1-10)
  echo "lammps-29Sep2021u2-mpi-omp-kokkos_serial-gcc${compiler_version}-${digest}"
}

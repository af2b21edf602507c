# Locates the LAMMPS the plugin is built for and defines:
#   otf_lammps           INTERFACE target: LAMMPS class headers + the compile definitions LAMMPS was built with
#   OTF_LAMMPS_EXECUTABLE  the lmp that the integration tests run
#   OTF_LAMMPS_VERSION     e.g. "29 Sep 2021", and OTF_LAMMPS_VERSION_ID, e.g. 20210929
#
# LAMMPS_ROOT is an install prefix with bin/lmp, lib/liblammps.so, include/lammps/*.h (all class headers,
# as scripts/build-lammps.sh installs them). For your own LAMMPS build, set LAMMPS_ROOT to its install
# prefix and, when its include/lammps folder lacks the class headers, LAMMPS_SOURCE_DIR to its src/ folder.
set(LAMMPS_ROOT "$ENV{LAMMPS_ROOT}" CACHE PATH "Install prefix of the LAMMPS to build the plugin for")
set(LAMMPS_SOURCE_DIR "" CACHE PATH "Optional: src/ folder of that LAMMPS, when its install lacks the class headers")

if(NOT LAMMPS_ROOT)
  otf_missing("LAMMPS (LAMMPS_ROOT is not set)"
    "Run scripts/setup.sh, which builds LAMMPS into a cache folder and passes it on, or configure with -DLAMMPS_ROOT=<prefix of a LAMMPS built with the PLUGIN package>")
endif()

set(_otf_lammps_include_dirs "")
if(EXISTS "${LAMMPS_ROOT}/include/lammps/pair.h")
  list(APPEND _otf_lammps_include_dirs "${LAMMPS_ROOT}/include/lammps")
endif()
if(LAMMPS_SOURCE_DIR)
  if(NOT EXISTS "${LAMMPS_SOURCE_DIR}/pair.h")
    otf_missing("LAMMPS class headers in LAMMPS_SOURCE_DIR=${LAMMPS_SOURCE_DIR}" "Point LAMMPS_SOURCE_DIR at the src/ folder of your LAMMPS source tree")
  endif()
  list(APPEND _otf_lammps_include_dirs "${LAMMPS_SOURCE_DIR}")
  foreach(_pkg PLUGIN KOKKOS OPENMP)
    if(IS_DIRECTORY "${LAMMPS_SOURCE_DIR}/${_pkg}")
      list(APPEND _otf_lammps_include_dirs "${LAMMPS_SOURCE_DIR}/${_pkg}")
    endif()
  endforeach()
endif()
if(NOT _otf_lammps_include_dirs)
  otf_missing("LAMMPS class headers (pair.h) under ${LAMMPS_ROOT}/include/lammps"
    "Use a LAMMPS built by scripts/build-lammps.sh, or also set -DLAMMPS_SOURCE_DIR=<your lammps>/src")
endif()
find_file(OTF_LAMMPS_PLUGIN_HEADER lammpsplugin.h PATHS ${_otf_lammps_include_dirs} NO_DEFAULT_PATH)
if(NOT OTF_LAMMPS_PLUGIN_HEADER)
  otf_missing("lammpsplugin.h" "The LAMMPS at ${LAMMPS_ROOT} has no plugin interface; rebuild it with -D PKG_PLUGIN=on")
endif()

find_program(OTF_LAMMPS_EXECUTABLE NAMES lmp lmp_mpi PATHS "${LAMMPS_ROOT}/bin" NO_DEFAULT_PATH)
if(NOT OTF_LAMMPS_EXECUTABLE)
  otf_missing("lmp under ${LAMMPS_ROOT}/bin" "Set LAMMPS_ROOT to the install prefix of your LAMMPS")
endif()

# The plugin must be compiled with the integer sizes and options LAMMPS itself was built with.
set(_otf_lammps_definitions "")
find_package(LAMMPS CONFIG QUIET PATHS "${LAMMPS_ROOT}" NO_DEFAULT_PATH)
if(TARGET LAMMPS::lammps)
  get_target_property(_defs LAMMPS::lammps INTERFACE_COMPILE_DEFINITIONS)
  if(_defs)
    foreach(_d IN LISTS _defs)
      string(REGEX REPLACE "^-D" "" _d "${_d}")
      if(_d MATCHES "^(LAMMPS_|LMP_)")
        list(APPEND _otf_lammps_definitions "${_d}")
      endif()
    endforeach()
  endif()
endif()
if(NOT _otf_lammps_definitions MATCHES "LAMMPS_(SMALLBIG|BIGBIG|SMALLSMALL)")
  list(APPEND _otf_lammps_definitions LAMMPS_SMALLBIG)
endif()

# Version of the LAMMPS we compile against, checked again at load time (otfplugin.cpp).
find_file(_otf_lammps_version_h version.h PATHS ${_otf_lammps_include_dirs} NO_DEFAULT_PATH)
file(STRINGS "${_otf_lammps_version_h}" _v REGEX "#define LAMMPS_VERSION ")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" OTF_LAMMPS_VERSION "${_v}")
string(REGEX MATCH "^([0-9]+) ([A-Za-z]+) ([0-9]+)$" _m "${OTF_LAMMPS_VERSION}")
set(_months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
list(FIND _months "${CMAKE_MATCH_2}" _month)
math(EXPR _month "${_month} + 1")
math(EXPR OTF_LAMMPS_VERSION_ID "${CMAKE_MATCH_3} * 10000 + ${_month} * 100 + ${CMAKE_MATCH_1}")

# pair_style otf/kk is built when this LAMMPS has the KOKKOS package (its headers installed) and
# the Kokkos it was built with is found.
set(OTF_LAMMPS_HAS_KOKKOS OFF)
find_file(_otf_lammps_kokkos_h kokkos.h PATHS ${_otf_lammps_include_dirs} NO_DEFAULT_PATH)
if(_otf_lammps_kokkos_h AND TARGET Kokkos::kokkos)
  set(OTF_LAMMPS_HAS_KOKKOS ON)
endif()

add_library(otf_lammps INTERFACE)
target_include_directories(otf_lammps SYSTEM INTERFACE ${_otf_lammps_include_dirs})
# The real release, for otf_lammps_compat.h (OTF_LAMMPS_VERSION_ID is what a plugin claims; the
# tests build one claiming another release).
target_compile_definitions(otf_lammps INTERFACE ${_otf_lammps_definitions}
  OTF_LAMMPS_API_VERSION=${OTF_LAMMPS_VERSION_ID})
target_link_libraries(otf_lammps INTERFACE MPI::MPI_CXX)
message(STATUS "OTF-Torch: LAMMPS ${OTF_LAMMPS_VERSION} (${OTF_LAMMPS_VERSION_ID}) at ${LAMMPS_ROOT}, definitions: ${_otf_lammps_definitions}, pair_style otf/kk: ${OTF_LAMMPS_HAS_KOKKOS}")

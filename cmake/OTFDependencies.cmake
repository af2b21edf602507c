# Finds every dependency once, and stops with one clear message naming what to install or set.
#   LibTorch : Debian's libtorch-dev, or your own with -DTorch_DIR=<libtorch>/share/cmake/Torch
#   MPI      : Debian's libopenmpi-dev
#   Kokkos   : Debian's libtrilinos-kokkos-dev, or your own with -DKokkos_DIR=...
#   JSON     : Debian's nlohmann-json3-dev
#   GTest    : Debian's libgtest-dev (tests only)
#   LAMMPS   : scripts/build-lammps.sh's cache folder, or your own with -DLAMMPS_ROOT=<prefix>

function(otf_missing what how)
  message(FATAL_ERROR "\nOTF-Torch: ${what} not found.\n  ${how}\n")
endfunction()

# Debian's TorchConfig probes for optional CUDA pieces and prints a lot; we only need the result.
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  otf_missing("LibTorch" "Install Debian's package (apt-get install libtorch-dev) or point CMake at your own LibTorch, e.g. -DTorch_DIR=/opt/libtorch/share/cmake/Torch")
endif()
# TorchConfig adds its flags (the C++ ABI macro) through TORCH_CXX_FLAGS only.
add_library(otf_torch INTERFACE)
target_link_libraries(otf_torch INTERFACE ${TORCH_LIBRARIES})
separate_arguments(_otf_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(otf_torch INTERFACE ${_otf_torch_flags})
# LibTorch 2.x headers stop with "#error C++20 or later compatible compiler is required"; 1.13 builds
# as C++17. Torch_VERSION comes from TorchConfigVersion.cmake; a LibTorch without one says it in
# torch/version.h.
if(NOT Torch_VERSION)
  find_file(_otf_torch_version_h torch/version.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(_otf_torch_version_h)
    file(STRINGS "${_otf_torch_version_h}" _otf_torch_major REGEX "define TORCH_VERSION_MAJOR")
    file(STRINGS "${_otf_torch_version_h}" _otf_torch_minor REGEX "define TORCH_VERSION_MINOR")
    string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _otf_torch_major "${_otf_torch_major}")
    string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _otf_torch_minor "${_otf_torch_minor}")
    set(Torch_VERSION "${_otf_torch_major}.${_otf_torch_minor}")
  endif()
endif()
if(Torch_VERSION VERSION_GREATER_EQUAL 2)
  set(CMAKE_CXX_STANDARD 20)
endif()
message(STATUS "OTF-Torch: LibTorch ${Torch_VERSION} from ${Torch_DIR}, C++${CMAKE_CXX_STANDARD}")

set(MPI_CXX_SKIP_MPICXX TRUE)
find_package(MPI QUIET COMPONENTS CXX)
if(NOT MPI_FOUND)
  otf_missing("MPI" "Install Debian's packages: apt-get install libopenmpi-dev openmpi-bin")
endif()

# Model specs and model file headers are JSON.
find_package(nlohmann_json 3 QUIET)
if(NOT nlohmann_json_FOUND)
  otf_missing("nlohmann JSON" "Install Debian's package (apt-get install nlohmann-json3-dev) or set -Dnlohmann_json_DIR=...")
endif()

include(FixDebianKokkos)
if(NOT TARGET Kokkos::kokkos)
  otf_missing("Kokkos" "Install Debian's package (apt-get install libtrilinos-kokkos-dev) or set -DKokkos_DIR=<kokkos>/lib/cmake/Kokkos")
endif()

if(OTF_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    otf_missing("GoogleTest" "Install Debian's package (apt-get install libgtest-dev) or configure with -DOTF_BUILD_TESTS=OFF")
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter)
  if(NOT Python3_FOUND)
    otf_missing("Python 3 (runs the LAMMPS integration tests)" "Install Debian's package (apt-get install python3) or configure with -DOTF_BUILD_TESTS=OFF")
  endif()
endif()

if(OTF_BUILD_PLUGIN)
  include(FindOTFLAMMPS)
endif()

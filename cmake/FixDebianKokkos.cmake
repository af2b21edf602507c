# Debian 12's Kokkos 3.4.1 (from Trilinos) declares the imported target Kokkos::kokkos with
# INTERFACE_INCLUDE_DIRECTORIES "<prefix>/lib/include", a folder that does not exist; CMake then
# refuses every target that links it. The headers are in the "trilinos" folder of the system
# include directory, which the same package reports correctly as Kokkos_INCLUDE_DIRS.
# This module finds Kokkos and, only if the target's include folders are missing, points the
# target at the folders that exist. A correct Kokkos (a user's own) is left untouched.
#
# Used by the project's CMakeLists.txt and, through CMAKE_PROJECT_INCLUDE, by the LAMMPS build
# of scripts/build-lammps.sh, so neither system files nor system folders are changed.

if(NOT TARGET Kokkos::kokkos)
  find_package(Kokkos CONFIG QUIET)
endif()
if(TARGET Kokkos::kokkos)
  get_target_property(_otf_kokkos_includes Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_otf_kokkos_missing OFF)
  foreach(_dir IN LISTS _otf_kokkos_includes)
    if(NOT _dir MATCHES "^\\$<" AND NOT IS_DIRECTORY "${_dir}")
      set(_otf_kokkos_missing ON)
    endif()
  endforeach()
  if(_otf_kokkos_missing)
    set(_otf_kokkos_fixed "")
    foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS)
      get_filename_component(_dir "${_dir}" ABSOLUTE)
      if(IS_DIRECTORY "${_dir}" AND EXISTS "${_dir}/Kokkos_Core.hpp")
        list(APPEND _otf_kokkos_fixed "${_dir}")
      endif()
    endforeach()
    if(NOT _otf_kokkos_fixed)
      message(FATAL_ERROR "Kokkos::kokkos names the missing include folder(s) '${_otf_kokkos_includes}' "
                          "and Kokkos_INCLUDE_DIRS='${Kokkos_INCLUDE_DIRS}' holds no Kokkos_Core.hpp. "
                          "Install libtrilinos-kokkos-dev or point Kokkos_DIR at a working Kokkos.")
    endif()
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_otf_kokkos_fixed}")
    message(STATUS "Kokkos: include folder corrected to ${_otf_kokkos_fixed} (Debian packaging bug)")
  endif()
endif()

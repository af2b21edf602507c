# Precompiles <torch/torch.h>, which is most of the compile time of every OTF-Torch file: parsing it
# alone took 60-120 s with LibTorch 2.15 in C++20 on this project's 2-core machines. On by default
# with LibTorch 2.x; off with 1.13, whose builds ccache already serves (ccache caches
# precompiled-header builds only with CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,
# include_file_ctime, which scripts/setup.sh sets).
if(Torch_VERSION VERSION_GREATER_EQUAL 2)
  set(_otf_pch_default ON)
else()
  set(_otf_pch_default OFF)
endif()
option(OTF_PRECOMPILE_TORCH "Precompile <torch/torch.h> for the engine, models, training layer, tests and benchmarks" ${_otf_pch_default})

# Libraries get their own precompiled header; executables (one file each) share the one of a
# small holder executable built with the same flags. Not for the LAMMPS plugin: its files keep
# LibTorch out (docs/design.md).
function(otf_precompile_torch target)
  if(NOT OTF_PRECOMPILE_TORCH)
    return()
  endif()
  get_target_property(_type ${target} TYPE)
  if(NOT _type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
    return()
  endif()
  if(NOT TARGET otf_torch_pch_holder)
    set(_main "${PROJECT_BINARY_DIR}/otf_torch_pch_holder.cpp")
    file(WRITE "${_main}" "int main() { return 0; }\n")
    add_executable(otf_torch_pch_holder "${_main}")
    target_link_libraries(otf_torch_pch_holder PRIVATE otf_engine)
    otf_target_defaults(otf_torch_pch_holder)
    target_precompile_headers(otf_torch_pch_holder PRIVATE <torch/torch.h>)
  endif()
  target_precompile_headers(${target} REUSE_FROM otf_torch_pch_holder)
endfunction()

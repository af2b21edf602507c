#!/usr/bin/env bash
# Compiles pair_style otf/kk for a CUDA Kokkos (PairOTFKokkos<Kokkos::Cuda> and its host variant)
# with nvcc, without a GPU: the Kokkos headers are Debian's (Trilinos' Kokkos 3.4, the one our
# LAMMPS uses) with a configuration header that enables the Cuda backend, the LAMMPS headers are
# the cached LAMMPS build's. It checks that the device instantiation of the style compiles (view
# types, layouts, strides and syncs of a CUDA build); it does not link or run anything.
#
# Needs Debian's non-free CUDA toolkit (nvcc 11.8, host compiler g++-11):
#   add "contrib non-free" to an apt source, then apt-get install nvidia-cuda-toolkit g++-11
# Usage: scripts/check-kokkos-cuda-compile.sh [LAMMPS include dir]   (exit 0: it compiled)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'check-kokkos-cuda-compile: %s\n' "$*" >&2; }

# Debian's nvcc 11.8 by default: Kokkos 3.4 predates newer CUDA releases.
nvcc=${NVCC:-$( [[ -x /usr/bin/nvcc ]] && echo /usr/bin/nvcc || command -v nvcc || true)}
[[ -n $nvcc ]] || { say "needs nvcc (see the header of this script)"; exit 2; }
for tool in g++-11 mpicxx; do
  command -v "$tool" >/dev/null || { say "needs $tool (see the header of this script)"; exit 2; }
done
kokkos_include=/usr/include/trilinos
[[ -f $kokkos_include/KokkosCore_config.h && -f $kokkos_include/Kokkos_Cuda.hpp ]] ||
  { say "needs Debian's Kokkos headers with their Cuda backend in $kokkos_include"; exit 2; }
lammps_include=${1:-$(ls -d "${OTF_TORCH_CACHE:-$HOME/.cache/otf-torch}"/lammps-29Sep2021-*kokkos*/include/lammps 2>/dev/null | head -1)}
[[ -n $lammps_include && -f $lammps_include/kokkos_type.h ]] ||
  { say "needs the include dir of a LAMMPS built with KOKKOS (scripts/setup.sh builds one)"; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
overlay=$work/include
mkdir -p "$overlay"
# Kokkos' configuration as a CUDA build of it would generate (Ampere, lambdas on, as LAMMPS wants).
sed -e 's|/\* #undef KOKKOS_ENABLE_CUDA \*/|#define KOKKOS_ENABLE_CUDA|' \
    -e 's|/\* #undef KOKKOS_ENABLE_CUDA_LAMBDA \*/|#define KOKKOS_ENABLE_CUDA_LAMBDA|' \
    -e 's|/\* #undef KOKKOS_ENABLE_CUDA_CONSTEXPR \*/|#define KOKKOS_ENABLE_CUDA_CONSTEXPR|' \
    -e 's|/\* #undef KOKKOS_COMPILER_CUDA_VERSION \*/|#define KOKKOS_COMPILER_CUDA_VERSION 118|' \
    -e 's|/\* #undef KOKKOS_ARCH_AMPERE80 \*/|#define KOKKOS_ARCH_AMPERE80|' \
    -e 's|/\* #undef KOKKOS_ARCH_AMPERE \*/|#define KOKKOS_ARCH_AMPERE|' \
    "$kokkos_include/KokkosCore_config.h" > "$overlay/KokkosCore_config.h"
grep -q '^#define KOKKOS_ENABLE_CUDA$' "$overlay/KokkosCore_config.h" ||
  { say "could not enable the Cuda backend in KokkosCore_config.h"; exit 1; }
for part in Fwd:fwd/Kokkos_Fwd_CUDA.hpp Declare:decl/Kokkos_Declare_CUDA.hpp Setup:setup/Kokkos_Setup_Cuda.hpp; do
  name=${part%%:*} header=${part#*:}
  file=KokkosCore_Config_${name}Backend.hpp
  # The generated file lists one include per backend inside its include guard.
  awk -v add="#include <$header>" '/^#endif/ && !done { print add; done = 1 } { print }' \
    "$kokkos_include/$file" > "$overlay/$file"
done

# The style's source, with proof that this is the CUDA instantiation: the device type is Cuda,
# distinct from the host type, and its views are not host arrays (the resident path is taken).
cat > "$work/pair_otf_kokkos_cuda.cu" <<PROBE
#include "$PWD/lammps-plugin/pair_otf_kokkos.cpp"
static_assert(std::is_same<LMPDeviceType, Kokkos::Cuda>::value, "not a Cuda build");
static_assert(!std::is_same<LMPDeviceType, LMPHostType>::value, "no host variant");
static_assert(!views_are_host_arrays<LMPDeviceType>(), "device views taken for host arrays");
static_assert(views_are_host_arrays<LMPHostType>(), "host views not taken for host arrays");
PROBE
say "$("$nvcc" --version | tail -1): pair_otf_kokkos.cpp for Kokkos Cuda and its host space, sm_80"
"$nvcc" -ccbin g++-11 -std=c++17 -arch=sm_80 --expt-extended-lambda --expt-relaxed-constexpr \
  -DLMP_KOKKOS -DOTF_WITH_KOKKOS -I"$overlay" -I"$kokkos_include" -I"$lammps_include" \
  -Ilammps-plugin -Ipotentials $(mpicxx --showme:compile) \
  -c "$work/pair_otf_kokkos_cuda.cu" -o "$work/pair_otf_kokkos_cuda.o"
say "otf/kk compiles for a CUDA Kokkos"

#!/usr/bin/env bash
# Makes a LibTorch 2.x prefix (include/, lib/, share/cmake/Torch) from PyPI's torch wheel, which is how
# most users get LibTorch (torch.utils.cmake_prefix_path), and prints the prefix as its last line:
#   scripts/fetch-libtorch.sh 2.15.0
# The Linux wheel is a CUDA build. We keep its CPU libraries (libc10, libtorch_cpu) and the two CUDA
# runtime libraries that libtorch_cpu itself needs (libcudart, libcupti through its profiler), from
# NVIDIA's wheels, so that the libraries load without a CUDA toolkit; libtorch_cuda and its
# gigabytes of cuBLAS/cuDNN/NCCL are left out. libtorch.so is then a stub linking libtorch_cpu, as in
# PyTorch's own CPU-only LibTorch, and share/cmake/Torch/TorchConfig.cmake is ours: the wheel's asks
# for the CUDA toolkit through Caffe2Config.cmake.
# Environment: OTF_TORCH_CACHE (default ~/.cache/otf-torch): the prefix is kept there as
#   libtorch-<version>-cpu-cu13runtime-<key>/ with a .complete marker;
#   OTF_TORCH_WHEELS: a folder of already-downloaded wheels (same file names), else they are
#   downloaded into $OTF_TORCH_CACHE/wheels. Every wheel is checked against the sha256 pinned here.
set -euo pipefail
version=${1:?usage: $0 VERSION (accepted: 2.15.0)}

pypi=https://files.pythonhosted.org/packages
# name sha256 path-under-$pypi; digests and paths from https://pypi.org/pypi/<name>/json.
# The CUDA runtime versions are the ones torch's cuda-toolkit==13.2.2 requirement pins.
case "$version" in
  2.15.0)
    wheels=(
      "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl 48c2d861134c0b5697c7602cb5ffa68f62a2989fdcd1717e593356f67996ca1e 06/7d/57b7f46934e1148b436889e385693bfcb94ae047b3fe0b6015922e3b66f7"
      "nvidia_cuda_runtime-13.2.86-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl 3498247680dfddce31bad102af7e3e26fc795342a3cac64722bb0fa95e7f60f0 70/c6/8f8c5e893d183082ea78f973aebc7ebc845ee219d68bddac73b0f62490fe"
      "nvidia_cuda_cupti-13.2.86-py3-none-manylinux_2_25_x86_64.whl 8fa29f15dd8336181f961764d9d95236fc6b931dd0c8fcf8cd70aab0c310b586 b4/76/a10d9fb5d9a0e46d5f95e5520bd1b2d8ad22a9c0a09d2f8c20c5ee842a96"
    )
    ;;
  *) echo "fetch-libtorch.sh: LibTorch $version is not pinned here (accepted: 2.15.0); add its wheels' sha256 to this script" >&2
     exit 2 ;;
esac
say() { echo "== fetch-libtorch: $*" >&2; }

# The key changes with the wheels and with this layout (bump layout_revision when the layout changes).
layout_revision=1
key=$( { printf '%s\n' "${wheels[@]}"; echo "layout $layout_revision"; } | sha256sum | cut -c1-10)
cache_root=${OTF_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otf-torch}
prefix=$cache_root/libtorch-$version-cpu-cu13runtime-$key
if [[ -f $prefix/.complete ]]; then
  echo "$prefix"
  exit 0
fi

wheel_dir=${OTF_TORCH_WHEELS:-$cache_root/wheels}
mkdir -p "$wheel_dir"
for entry in "${wheels[@]}"; do
  read -r name sha path <<<"$entry"
  if [[ ! -f $wheel_dir/$name ]]; then
    say "downloading $name"
    curl -fsSL --retry 3 -o "$wheel_dir/$name.part" "$pypi/$path/$name"
    mv "$wheel_dir/$name.part" "$wheel_dir/$name"
  fi
  echo "$sha  $wheel_dir/$name" | sha256sum --check --quiet ||
    { echo "fetch-libtorch.sh: $wheel_dir/$name does not have the pinned sha256 $sha; delete it to download it again" >&2; exit 1; }
done

work=$prefix.work
rm -rf "$work"
mkdir -p "$work/lib" "$work/share/cmake/Torch"
# extract WHEEL SOURCE=TARGET...: copies the wheel's file SOURCE to TARGET, or every file under the
# wheel's folder SOURCE/ into folder TARGET. Python's zipfile, because unzip is not on a fresh Debian.
extract() {
  python3 - "$@" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [m.filename for m in z.infolist() if not m.is_dir()]
    for spec in sys.argv[2:]:
        source, target = spec.split("=", 1)
        if source.endswith("/"):
            pairs = [(n, os.path.join(target, n[len(source):])) for n in names if n.startswith(source)]
        else:
            pairs = [(source, target)] if source in names else []
        if not pairs:
            sys.exit(f"fetch-libtorch.sh: {sys.argv[1]} has no {source}")
        for name, out in pairs:
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.chmod(out, 0o755 if ".so" in out else 0o644)
PY
}
torch_wheel=$wheel_dir/${wheels[0]%% *}
say "extracting LibTorch $version from $(basename "$torch_wheel")"
extract "$torch_wheel" torch/include/="$work/include" torch/lib/libc10.so="$work/lib/libc10.so" \
  torch/lib/libtorch_cpu.so="$work/lib/libtorch_cpu.so" \
  torch/share/cmake/Torch/TorchConfigVersion.cmake="$work/share/cmake/Torch/TorchConfigVersion.cmake"
extract "$wheel_dir/${wheels[1]%% *}" nvidia/cu13/lib/libcudart.so.13="$work/lib/libcudart.so.13"
extract "$wheel_dir/${wheels[2]%% *}" nvidia/cu13/lib/libcupti.so.13="$work/lib/libcupti.so.13"

# libtorch.so: an empty library that needs libtorch_cpu and libc10 (what the CPU-only LibTorch ships).
echo 'void otf_libtorch_cpu_stub(void) {}' | cc -shared -fPIC -x c - -o "$work/lib/libtorch.so" \
  -Wl,--no-as-needed -L"$work/lib" -ltorch_cpu -lc10 -Wl,-rpath,'$ORIGIN'

cat >"$work/share/cmake/Torch/TorchConfig.cmake" <<'CMAKE'
# LibTorch made by OTF-Torch's scripts/fetch-libtorch.sh from PyPI's torch wheel: the CPU libraries
# only, so this configuration needs no CUDA toolkit (the wheel's own one does). Defines the imported
# target torch and the variables of PyTorch's TorchConfig.cmake that consumers use.
get_filename_component(TORCH_INSTALL_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(TORCH_INCLUDE_DIRS "${TORCH_INSTALL_PREFIX}/include" "${TORCH_INSTALL_PREFIX}/include/torch/csrc/api/include")
# PyPI's wheels are built with the C++11 ABI since 2.7.
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")
set(TORCH_LIBRARY "${TORCH_INSTALL_PREFIX}/lib/libtorch.so")
if(NOT TARGET torch)
  add_library(c10 SHARED IMPORTED)
  set_target_properties(c10 PROPERTIES IMPORTED_LOCATION "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
  add_library(torch_cpu SHARED IMPORTED)
  set_target_properties(torch_cpu PROPERTIES IMPORTED_LOCATION "${TORCH_INSTALL_PREFIX}/lib/libtorch_cpu.so"
    INTERFACE_LINK_LIBRARIES c10)
  add_library(torch SHARED IMPORTED)
  set_target_properties(torch PROPERTIES IMPORTED_LOCATION "${TORCH_LIBRARY}"
    INTERFACE_LINK_LIBRARIES "torch_cpu;c10"
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
    # LibTorch 2.x headers require C++20.
    INTERFACE_COMPILE_FEATURES cxx_std_20)
endif()
set(TORCH_LIBRARIES torch)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Torch DEFAULT_MSG TORCH_LIBRARY TORCH_INCLUDE_DIRS)
CMAKE

missing=$(ldd "$work/lib/libtorch_cpu.so" "$work/lib/libtorch.so" | grep 'not found' || true)
[[ -z $missing ]] || { echo "fetch-libtorch.sh: unresolved libraries in $work/lib:" >&2; echo "$missing" >&2; exit 1; }
touch "$work/.complete"
rm -rf "$prefix"
mv "$work" "$prefix"
say "LibTorch $version in $prefix"
echo "$prefix"

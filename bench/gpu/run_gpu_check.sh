#!/usr/bin/env bash
# Device check (issue: Kokkos and CUDA paths): builds the Kokkos-to-LibTorch device mapping with
# the machine's CUDA LibTorch (PyTorch's C++ library) and runs kokkos_device_gpu_check.cpp; then
# builds the engine and the potentials and runs resident_gpu_check.cpp (otf/kk's GPU evaluation,
# host-array evaluation with the model on the GPU, training steps on the GPU, each against the
# CPU). The second part was written after the first ran on an H200 and has not run on a GPU yet.
# Run from the repository root on a machine with an NVIDIA GPU and PyTorch; writes to ${OUT:-.}.
set -euo pipefail
out=${OUT:-.}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
torch_dir=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$out/gpu.txt"
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI="$abi" -Isrc \
  -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" \
  src/kokkos_device.cpp bench/gpu/kokkos_device_gpu_check.cpp -o /tmp/kokkos_device_gpu_check \
  -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -Wl,--no-as-needed -ltorch_cuda -lc10_cuda \
  -Wl,--as-needed -ltorch -ltorch_cpu -lc10 2>&1 | tail -20
/tmp/kokkos_device_gpu_check 2>&1 | tee -a "$out/gpu.txt"

# The model on the GPU (resident_gpu_check.cpp): the engine and the potentials compiled against
# this LibTorch (no MPI, no LAMMPS). nlohmann/json.hpp comes from /usr/include or $JSON_INCLUDE
# (a machine without it: carry a copy of Debian's /usr/include/nlohmann and point JSON_INCLUDE at
# its parent).
engine_sources=$(ls src/*.cpp | grep -v mpi_communicator.cpp)
g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI="$abi" -DOTF_VERSION='"gpu-check"' -Isrc -Ipotentials \
  -isystem "${JSON_INCLUDE:-/usr/include}" \
  -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" \
  $engine_sources potentials/*.cpp bench/gpu/resident_gpu_check.cpp -o /tmp/resident_gpu_check \
  -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -Wl,--no-as-needed -ltorch_cuda -lc10_cuda \
  -Wl,--as-needed -ltorch -ltorch_cpu -lc10 2>&1 | tail -30 | tee -a "$out/gpu.txt"
/tmp/resident_gpu_check 2>&1 | tee -a "$out/gpu.txt"

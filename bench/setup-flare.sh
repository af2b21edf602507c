#!/usr/bin/env bash
# Installs the FLARE peer of bench/bench_flare_peer.py (issue 39): PyPI's mir-flare 1.4.0 (sparse
# GP on B2 descriptors) in a venv of Debian's /usr/bin/python3 (which brings numpy, scipy and ASE
# from Debian), at ${OTF_TORCH_CACHE:-~/.cache/otf-torch}/flare-venv-1.4.0. Prints the venv's
# python at the end. Idempotent: nothing is built when the venv already imports FLARE's C++ module.
#
# Why not `pip install mir-flare`: its CMakeLists clones googletest, nlohmann_json and pybind11 and
# downloads Eigen from GitHub at configure time (fails offline), and requirements.txt pins
# numpy<1.23 (no wheel for Python 3.11) and wandb. So: the sdist is patched to find Debian's
# libeigen3-dev and nlohmann-json3-dev and PyPI's pybind11 (and to skip its C++ tests), built with
# --no-deps --no-build-isolation against Debian's numpy, beside numba<0.61 (the last series that
# takes numpy 1.24); flare.learners.otf imports wandb only to log to it when asked (wandb_log), so
# a stub module stands in. FLARE links LAPACKE and an OpenBLAS: Debian's liblapacke-dev and
# libopenblas-dev; installing the latter switches the BLAS alternatives to the pthread OpenBLAS,
# and OTF-Torch needs the OpenMP one (libopenblas0-openmp), so they are set back afterwards.
# FLARE_BUILD_JOBS (default: the CPUs this process may use) bounds the build's parallelism.
set -euo pipefail

python=/usr/bin/python3
version=1.4.0
cache=${OTF_TORCH_CACHE:-$HOME/.cache/otf-torch}
venv=$cache/flare-venv-$version
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)

flare_imports() { [[ -x $venv/bin/python ]] && "$venv/bin/python" -c "import flare.bffs.sgp._C_flare" 2>/dev/null; }

# Set libblas.so.3, liblapack.so.3 and libopenblas.so.0 back to the OpenMP OpenBLAS where it is
# installed (apt may have switched them to the pthread variant, whose priority is higher).
restore_openmp_blas() {
  local name target
  for name in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
    target=/usr/lib/$multiarch/openblas-openmp/$name
    if [[ -e $target ]] && update-alternatives --query "$name-$multiarch" >/dev/null 2>&1; then
      if ! update-alternatives --query "$name-$multiarch" | grep -qx "Value: $target"; then
        if [[ $(id -u) == 0 ]]; then
          update-alternatives --set "$name-$multiarch" "$target"
        else
          echo "setup-flare: $name-$multiarch does not point at $target; as root run" \
               "update-alternatives --set $name-$multiarch $target" >&2
        fi
      fi
    fi
  done
}

write_wandb_stub() {
  local site
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  [[ -f $site/wandb/__init__.py ]] && return 0
  mkdir -p "$site/wandb"
  cat > "$site/wandb/__init__.py" <<'EOF'
"""Stand-in for wandb, written by OTF-Torch's bench/setup-flare.sh: flare.learners.otf imports
wandb at module level but calls it only when OTF(wandb_log=...) is given, which the benchmark
never does. Any call is an error, so a use is never silent."""


def _unavailable(*args, **kwargs):
    raise RuntimeError("wandb is a stub in this venv (bench/setup-flare.sh); do not pass wandb_log")


init = log = finish = _unavailable
EOF
}

if flare_imports; then
  write_wandb_stub
  restore_openmp_blas
  "$venv/bin/python" -c "import flare.learners.otf"
  echo "$venv/bin/python"
  exit 0
fi

# System packages: compilers, CMake, headers, LAPACKE and an OpenBLAS to link.
packages=(g++ cmake python3-dev python3-venv libeigen3-dev nlohmann-json3-dev liblapacke-dev
          libopenblas-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "setup-flare: missing Debian packages: ${missing[*]} (apt-get install them as root)" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
restore_openmp_blas

"$python" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet "pybind11>=2.10" "numba<0.61"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/pip" download --quiet --no-deps --no-binary :all: -d "$work" "mir-flare==$version"
tar -xzf "$work/mir_flare-$version.tar.gz" -C "$work"
source_dir=$work/mir_flare-$version

# Offline dependencies: replace the FetchContent / ExternalProject blocks by find_package calls.
"$venv/bin/python" - "$source_dir" <<'EOF'
import re
import sys

root = sys.argv[1]
path = f"{root}/CMakeLists.txt"
text = open(path).read()
replacements = [
    # googletest and nlohmann_json (FetchContent from GitHub) -> Debian's nlohmann-json3-dev
    (r"# googletest\n.*?include_directories\(\$\{json_SOURCE_DIR\}\)\n",
     "find_package(nlohmann_json 3 REQUIRED)\n"),
    # Eigen 3.3.7 (tarball from GitHub) -> Debian's libeigen3-dev
    (r"ExternalProject_Add\(\n    eigen_project.*?include_directories\(\$\{SOURCE_DIR\}\)\n",
     "find_package(Eigen3 3.3 REQUIRED NO_MODULE)\nadd_custom_target(eigen_project)\n"
     "include_directories(${EIGEN3_INCLUDE_DIRS})\n"),
    # pybind11 (git clone) -> PyPI's pybind11, pybind11_DIR given on the command line
    (r"FetchContent_Declare\(\n    pybind11\n.*?FetchContent_MakeAvailable\(pybind11\)\n",
     "find_package(pybind11 CONFIG REQUIRED)\n"),
    # the C++ tests need googletest
    (r"add_subdirectory\(ctests\)", ""),
]
for pattern, replacement in replacements:
    text, count = re.subn(pattern, lambda match: replacement, text, flags=re.S)
    if count != 1:
        sys.exit(f"setup-flare: CMakeLists.txt of mir-flare changed, pattern not found: {pattern}")
open(path, "w").write(text)

# setup.py builds with --parallel 2 * cpu_count(): bound it.
path = f"{root}/setup.py"
text = open(path).read()
old = '"{}".format(multiprocessing.cpu_count() * 2)'
if old not in text:
    sys.exit("setup-flare: setup.py of mir-flare changed, build parallelism not found")
text = text.replace(old, 'os.environ.get("FLARE_BUILD_JOBS", str(len(os.sched_getaffinity(0))))')
open(path, "w").write(text)
EOF

pybind11_dir=$("$venv/bin/python" -m pybind11 --cmakedir)
FLARE_CMAKE_FLAGS="-Dpybind11_DIR=$pybind11_dir -DCMAKE_BUILD_TYPE=Release" \
  "$venv/bin/pip" install --no-deps --no-build-isolation "$source_dir"
write_wandb_stub
restore_openmp_blas
"$venv/bin/python" -c "import flare.bffs.sgp._C_flare, flare.learners.otf"
echo "$venv/bin/python"

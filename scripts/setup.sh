#!/usr/bin/env bash
# Installs the Debian packages gpuxray needs (only those missing) and builds it. Safe to run again.
#
#   scripts/setup.sh [--sanitize] [--no-benchmarks] [--build-dir DIR]
#
# --sanitize builds with AddressSanitizer and UndefinedBehaviorSanitizer (default dir: build-asan),
# which leaves the benchmark programs out, as --no-benchmarks does.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=OFF
benchmarks=ON
build_dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) sanitize=ON; benchmarks=OFF ;;
    --no-benchmarks) benchmarks=OFF ;;
    --build-dir) build_dir="$2"; shift ;;
    *) echo "setup.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
  shift
done
[[ -n "$build_dir" ]] || build_dir=$([[ $sanitize == ON ]] && echo build-asan || echo build)

# nlohmann-json3-dev and libyaml-cpp-dev: simulate's input files; libsimdjson-dev and zlib1g-dev: the
# PyTorch-profiler importer; clang and libclang-rt-dev: its fuzz target.
packages=(cmake ninja-build g++ libprotobuf-dev protobuf-compiler libcli11-dev libfmt-dev catch2 libzstd-dev
          nlohmann-json3-dev libyaml-cpp-dev libsimdjson-dev zlib1g-dev clang libclang-rt-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# The HTML report (web/): Node.js and npm bundle its script; chromium runs its browser tests. A Node.js
# from elsewhere (NodeSource) is kept.
command -v node > /dev/null || missing+=(nodejs)
command -v npm > /dev/null || missing+=(npm)
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup.sh: installing ${missing[*]}"
  sudo_if_needed=$([[ $(id -u) -eq 0 ]] && echo "" || echo sudo)
  $sudo_if_needed apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_if_needed apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The capture library needs the CUDA 13.0 toolkit's CUPTI and NVTX headers (no GPU); without them
# only the analyzer is built.
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [[ ! -f "$cuda_root/include/cupti.h" || ! -f "$cuda_root/include/cuda.h" ]]; then
  echo "setup.sh: no CUDA 13.0 toolkit at $cuda_root (no include/cupti.h), so the capture library and" \
       "'gpuxray run' are left out and only the analyzer is built; set CUDAToolkit_ROOT to the toolkit" \
       "to build capture too" >&2
fi

# web/'s packages, exactly as package-lock.json pins them (from the npm registry; the build itself
# downloads nothing). Skipped when they are installed from this lock file already.
if [[ ! -f web/node_modules/.gpuxray-lock ]] || ! cmp -s web/package-lock.json web/node_modules/.gpuxray-lock; then
  if (cd web && npm ci --no-audit --no-fund --loglevel=error); then
    cp web/package-lock.json web/node_modules/.gpuxray-lock
  else
    echo "setup.sh: 'npm ci' in web/ failed, so gpuxray is built without the HTML report (gpuxray report)" >&2
  fi
fi

mkdir -p "$build_dir"
# The CUDA workloads are for the GPU checks, which use the normal build.
cuda_examples=$([[ $sanitize == ON ]] && echo OFF || echo ON)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUXRAY_SANITIZE="$sanitize" \
      -DGPUXRAY_BUILD_BENCHMARKS="$benchmarks" -DGPUXRAY_BUILD_CUDA_EXAMPLES="$cuda_examples" \
      -DCUDAToolkit_ROOT="$cuda_root" > "$build_dir/configure.log" ||
  { cat "$build_dir/configure.log"; exit 1; }
cmake --build "$build_dir"

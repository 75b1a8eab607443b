#!/usr/bin/env bash
# Builds the release packages, a .deb and a relocatable .tar.gz (cmake/Packaging.cmake), into dist/,
# then checks them as a user gets them (scripts/check_package.sh).
#
#   scripts/package.sh [--build-dir DIR]
#
# DIR (default build-package) is configured with GPUXRAY_PORTABLE=ON; an existing build such as
# build/ may be given: only the linking of gpuxray and the library changes.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-package
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift ;;
    *) echo "package.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
  shift
done

cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [[ ! -f "$cuda_root/include/cupti.h" ]]; then
  echo "package.sh: the release packages hold the capture library, which needs the CUDA 13.0 toolkit;" \
       "none at $cuda_root (set CUDAToolkit_ROOT)" >&2
  exit 1
fi
for tool in cpack dpkg-deb objdump; do
  command -v "$tool" > /dev/null || { echo "package.sh: $tool is needed (scripts/setup.sh installs it)" >&2; exit 1; }
done

mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUXRAY_PORTABLE=ON \
      -DCUDAToolkit_ROOT="$cuda_root" > "$build_dir/configure-package.log" ||
  { cat "$build_dir/configure-package.log"; exit 1; }
cmake --build "$build_dir" --target gpuxray gpuxray_inject
rm -rf dist
cpack --config "$build_dir/CPackConfig.cmake" -B "$PWD/dist" > "$build_dir/cpack.log" ||
  { cat "$build_dir/cpack.log"; exit 1; }
rm -rf dist/_CPack_Packages
version=$(sed -n 's/.*kToolVersion = "\(.*\)";/\1/p' "$build_dir/generated/gpuxray/version.h")
deb=$(ls dist/gpuxray_"$version"_*.deb)
tarball=$(ls dist/gpuxray-"$version"-linux-*.tar.gz)
ls -l "$deb" "$tarball"
scripts/check_package.sh "$deb" "$tarball"

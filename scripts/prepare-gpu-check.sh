#!/usr/bin/env bash
# Run HERE (the machine without a GPU) before asking the device tool to run scripts/gpu-check.sh:
# builds what the GPU check needs and copies it into one folder that git ignores (through
# .git/info/exclude), which the device run carries:
#
#   gpu-check-bundle/
#     libgpuxray_inject.so  gpuxray  trace_dump        (debug info stripped)
#     stream_workload  launch_bound_loop               (the CUDA examples)
#     nccl_collectives                                 (the NCCL example, when NCCL was found to build
#                                                       it; its libnccl.so.2 is the GPU machine's own:
#                                                       at 200+ MiB it cannot travel)
#     train_transformer.py  ddp_single_rank.py         (the PyTorch examples)
#     lib/                                             (shared libraries gpuxray and trace_dump need
#                                                       that the GPU machine lacks: protobuf, fmt, zstd)
#     MANIFEST                                         (what, from where, sizes, checksums)
#
#   scripts/prepare-gpu-check.sh [--build-dir DIR] [--bundle DIR] [--no-build]
#
# --build-dir: a normal (not sanitizer) build directory, configured if needed; default build.
# --no-build: copy what is already built.
# Then, with the device tool: run(command="bash scripts/gpu-check.sh", carry=["gpu-check-bundle"]).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
bundle=gpu-check-bundle
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift ;;
    --bundle) bundle="$2"; shift ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "prepare-gpu-check.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
  shift
done
die() { echo "prepare-gpu-check.sh: $*" >&2; exit 1; }

targets=(gpuxray gpuxray_inject trace_dump stream_workload launch_bound_loop)
if [[ $build == 1 ]]; then
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    mkdir -p "$build_dir"
    cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build_dir/configure.log" 2>&1 ||
      { cat "$build_dir/configure.log"; die "configuring $build_dir failed"; }
  fi
  # nccl_collectives exists only where CMake found NCCL (examples/CMakeLists.txt).
  build_targets=$(cmake --build "$build_dir" --target help 2>/dev/null || true)
  if grep -q '^nccl_collectives:' <<< "$build_targets"; then
    targets+=(nccl_collectives)
  else
    echo "prepare-gpu-check.sh: no nccl_collectives target in $build_dir (NCCL not found); the bundle goes without it"
  fi
  cmake --build "$build_dir" --target "${targets[@]}"
fi
[[ -f "$build_dir/CMakeCache.txt" ]] || die "$build_dir is not a build directory"
if grep -q '^GPUXRAY_SANITIZE:BOOL=ON' "$build_dir/CMakeCache.txt"; then
  die "$build_dir is a sanitizer build; the GPU check needs a normal one (the injection library cannot carry ASan into a job)"
fi

# Where each file comes from.
declare -A sources=(
  [libgpuxray_inject.so]="$build_dir/libgpuxray_inject.so"
  [gpuxray]="$build_dir/gpuxray"
  [trace_dump]="$build_dir/examples/trace_dump"
  [stream_workload]="$build_dir/examples/stream_workload"
  [launch_bound_loop]="$build_dir/examples/launch_bound_loop"
  [train_transformer.py]="examples/pytorch/train_transformer.py"
  [ddp_single_rank.py]="examples/pytorch/ddp_single_rank.py"
)
binaries=(libgpuxray_inject.so gpuxray trace_dump stream_workload launch_bound_loop)
# Optional: built only where CMake found NCCL.
if [[ -f "$build_dir/examples/nccl_collectives" ]]; then
  sources[nccl_collectives]="$build_dir/examples/nccl_collectives"
  binaries+=(nccl_collectives)
fi
for name in "${!sources[@]}"; do
  [[ -f "${sources[$name]}" ]] || die "${sources[$name]} is missing (was nvcc found? see GPUXRAY_BUILD_CUDA_EXAMPLES)"
done

# Keep the bundle out of git without touching .gitignore.
exclude=.git/info/exclude
if [[ -f .git ]]; then  # a worktree: the exclude file lives in the common git dir
  gitdir=$(sed -n 's/^gitdir: //p' .git)
  [[ -f "$gitdir/commondir" ]] && gitdir="$gitdir/$(cat "$gitdir/commondir")"
  exclude="$gitdir/info/exclude"
fi
if [[ -d "$(dirname "$exclude")" || -d .git ]]; then
  mkdir -p "$(dirname "$exclude")"
  grep -qxF "/$bundle/" "$exclude" 2>/dev/null || echo "/$bundle/" >> "$exclude"
fi

rm -rf "$bundle"
mkdir -p "$bundle/lib"
for name in "${!sources[@]}"; do
  cp "${sources[$name]}" "$bundle/$name"
done
for binary in "${binaries[@]}"; do
  strip --strip-debug "$bundle/$binary"
done
chmod +x "${binaries[@]/#/$bundle/}"

# Shared libraries of the analyzer side that a machine without Debian's packages lacks. The C and C++
# runtimes (newer there) and the CUDA libraries (there already) stay behind. The injection library
# needs only libzstd of these; gpu-check.sh checks whether the GPU machine has one.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libcuda|libcublas|libcudart|libnvidia)'
for binary in gpuxray trace_dump libgpuxray_inject.so; do
  while read -r soname path; do
    [[ "$soname" =~ $skip ]] && continue
    [[ -f "$path" ]] || die "ldd says $binary needs $soname, which is not found here"
    [[ -f "$bundle/lib/$soname" ]] || cp -L "$path" "$bundle/lib/$soname"
  done < <(ldd "${sources[$binary]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done
strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null || true

{
  echo "gpuxray GPU-check bundle, made $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname) from $build_dir"
  echo "build type: $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build_dir/CMakeCache.txt")"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
  echo
  (cd "$bundle" && find . -type f ! -name MANIFEST | sort | xargs sha256sum)
} > "$bundle/MANIFEST"

total=$(du -sb "$bundle" | cut -f1)
echo "prepare-gpu-check.sh: $bundle holds $(find "$bundle" -type f | wc -l) files, $((total / 1024)) KiB:"
(cd "$bundle" && ls -la . lib | sed 's/^/  /')
if (( total > 48 * 1024 * 1024 )); then
  die "the bundle is $((total >> 20)) MiB; with the working tree it must stay under 64 MiB"
fi
echo "prepare-gpu-check.sh: now run on the device: bash scripts/gpu-check.sh (carry: $bundle)"

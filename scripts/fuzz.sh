#!/usr/bin/env bash
# Builds the PyTorch-profiler importer's fuzz target with clang (libFuzzer, AddressSanitizer, UBSan)
# in build-fuzz and runs it for SECONDS (default 60) from the seed traces in tests/fuzz/corpus.
# Exits non-zero on any crash, hang or sanitizer report (the input is left in build-fuzz/).
#
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
mkdir -p build-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_COMPILER=clang++ -DGPUXRAY_FUZZ=ON -DGPUXRAY_BUILD_TESTS=OFF \
      -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" > build-fuzz/configure.log ||
  { cat build-fuzz/configure.log; exit 1; }
cmake --build build-fuzz --target kineto_import_fuzz
corpus=build-fuzz/corpus
mkdir -p "$corpus"
cp tests/fuzz/corpus/* "$corpus"/
cd build-fuzz
tests/fuzz/kineto_import_fuzz -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
                     -print_final_stats=1 corpus

#!/usr/bin/env bash
# Builds the fuzz targets with clang (libFuzzer, AddressSanitizer, UBSan) in build-fuzz and runs each
# for SECONDS (default 60):
#   kineto_import_fuzz  the PyTorch-profiler importer, from the seed traces in tests/fuzz/corpus;
#   native_load_fuzz    the native reader and loader, from seeds cut from a run simulated now (with
#                       build/gpuxray when there is one, else a gpuxray built here with clang).
# The targets run side by side. Exits non-zero on any crash, hang, sanitizer report or runaway allocation (the input is left in
# build-fuzz/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(kineto_import_fuzz native_load_fuzz)
mkdir -p build-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_COMPILER=clang++ -DGPUXRAY_FUZZ=ON -DGPUXRAY_BUILD_TESTS=OFF \
      -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" > build-fuzz/configure.log ||
  { cat build-fuzz/configure.log; exit 1; }
cmake --build build-fuzz --target "${targets[@]}" native_fuzz_seeds

fuzz_options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
# The targets run at once (one core each), each for SECONDS; the script fails if any of them does.
pids=()
for target in "${targets[@]}"; do
  corpus=build-fuzz/corpus-$target
  rm -rf "$corpus"
  mkdir -p "$corpus"
  case $target in
    kineto_import_fuzz)
      cp tests/fuzz/corpus/* "$corpus"/
      max_len=8192 ;;
    native_load_fuzz)
      gpuxray=build/gpuxray
      if [[ ! -x $gpuxray ]]; then
        cmake --build build-fuzz --target gpuxray
        gpuxray=build-fuzz/gpuxray
      fi
      rm -rf build-fuzz/simulated
      "$gpuxray" simulate --preset demo --steps 1 -o build-fuzz/simulated > /dev/null
      build-fuzz/tests/fuzz/native_fuzz_seeds "$corpus" build-fuzz/simulated/rank-0000{0,5,9}.gpuxray
      max_len=16384 ;;
    *) echo "fuzz.sh: unknown target '$target'" >&2; exit 1 ;;
  esac
  (cd build-fuzz && "tests/fuzz/$target" "${fuzz_options[@]}" -max_len="$max_len" "corpus-$target" \
     > "fuzz-$target.log" 2>&1) &
  pids+=("$!")
done
status=0
for i in "${!targets[@]}"; do
  if wait "${pids[$i]}"; then
    tail -n 12 "build-fuzz/fuzz-${targets[$i]}.log"
  else
    status=1
    echo "fuzz.sh: ${targets[$i]} failed (build-fuzz/fuzz-${targets[$i]}.log):" >&2
    tail -n 60 "build-fuzz/fuzz-${targets[$i]}.log" >&2
  fi
done
exit "$status"

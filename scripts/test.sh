#!/usr/bin/env bash
# Builds gpuxray twice and runs every test: in the normal build, then in a build with
# AddressSanitizer and UndefinedBehaviorSanitizer (which leaves out the few tests that load
# libraries with RTLD_DEEPBIND, as the sanitizer cannot run them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --build-dir build
ctest --test-dir build --output-on-failure -j "$(nproc)"
scripts/setup.sh --sanitize --build-dir build-asan
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"

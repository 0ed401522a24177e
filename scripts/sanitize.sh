#!/usr/bin/env bash
# The sanitizer job: builds the CPU-only configuration with AddressSanitizer and UndefinedBehaviorSanitizer
# (MINIDL_SANITIZE=ON adds -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer to
# everything) and runs the whole CPU test suite. A sanitizer report aborts the test that triggered it, so any
# memory error, leak or undefined behaviour fails the job.
# Usage: scripts/sanitize.sh   (MINIDL_SANITIZE_BUILD_DIR overrides the build directory, default build/asan)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${MINIDL_SANITIZE_BUILD_DIR:-build/asan}
jobs=$(nproc)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# -O1 -g1: the usual sanitizer build (fast enough to run every test, line numbers in reports); no NDEBUG, so
# Eigen's and the standard library's own assertions are checked as well.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DMINIDL_WITH_CUDA=OFF \
  -DMINIDL_SANITIZE=ON -DMINIDL_BUILD_BENCH=OFF
cmake --build "$dir" -j "$jobs"
ctest --test-dir "$dir" --output-on-failure -j "$jobs"

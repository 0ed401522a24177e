#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: the IDX and safetensors readers, with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer) and runs each for SECONDS (default 60), starting from the seed corpus generated
# from the tests' malformed-file builders plus whatever earlier runs in this build directory found.
# Exits non-zero on the first crash, sanitizer report, leak, timeout or out-of-memory; the input that caused
# it is left in <build>/artifacts/<target>/ (replay: <build>/fuzz/fuzz_<target> <file>).
# Usage: scripts/fuzz.sh [SECONDS]   (MINIDL_FUZZ_BUILD_DIR overrides the build directory, default build/fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=${MINIDL_FUZZ_BUILD_DIR:-build/fuzz}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINIDL_FUZZ=ON \
  -DMINIDL_WITH_CUDA=OFF -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_EXAMPLES=OFF -DMINIDL_BUILD_BENCH=OFF
cmake --build "$dir" -j "$(nproc)" --target fuzz_idx fuzz_safetensors make_fuzz_corpus
"$dir/fuzz/make_fuzz_corpus" "$dir/seeds"

for target in idx safetensors; do
  mkdir -p "$dir/corpus/$target" "$dir/artifacts/$target"
  dict=()
  [ -f "fuzz/$target.dict" ] && dict=("-dict=fuzz/$target.dict")
  echo "=== fuzz_$target for ${seconds} s"
  # The first directory receives new interesting inputs; the seeds are read only.
  "$dir/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$target/" "${dict[@]}" "$dir/corpus/$target" "$dir/seeds/$target"
done

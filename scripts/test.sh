#!/usr/bin/env bash
# Installs dependencies, then builds and tests minidl: the CUDA-enabled configuration (when a CUDA toolkit and
# cuDNN are installed; GPU tests skip with a reason where no GPU is present) and the CPU-only configuration (in
# Release where there is no toolkit or the hardening pass is skipped; otherwise the sanitizer build is it),
# each followed by the install check (scripts/check-consumer.sh: a separate project uses the installed package);
# then the CPU-only suite under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh) and
# 60 seconds of libFuzzer on each file reader (scripts/fuzz.sh). MINIDL_SKIP_HARDENING=1 skips those two.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
hardening=$([ "${MINIDL_SKIP_HARDENING:-0}" != 1 ] && echo 1 || echo 0)
configs=("build/cpu-only:-DMINIDL_WITH_CUDA=OFF")
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
  # With a toolkit, the CUDA configuration runs every CPU test in Release, and the sanitizer build below is the
  # CPU-only configuration of the same sources with every CPU test: a third build (Release, CPU-only) would only
  # repeat them, and on a 2-core CI machine it costs a third of the run. MINIDL_TEST_CPU_ONLY=1 builds it anyway.
  if [ "$hardening" = 1 ] && [ "${MINIDL_TEST_CPU_ONLY:-0}" != 1 ]; then
    configs=("build/cuda:-DMINIDL_WITH_CUDA=ON")
  else
    configs=("build/cuda:-DMINIDL_WITH_CUDA=ON" "${configs[@]}")
  fi
fi
start=$SECONDS
for entry in "${configs[@]}"; do
  dir=${entry%%:*}
  flags=${entry#*:}
  echo "=== configuration $dir ($flags)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release $flags
  cmake --build "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
  bash scripts/check-consumer.sh "$dir"   # install into a temporary prefix; build + run tests/consumer
  echo "=== configuration $dir done at $((SECONDS - start)) s"
done
if [ "$hardening" = 1 ]; then
  echo "=== configuration build/asan (CPU-only, AddressSanitizer + UndefinedBehaviorSanitizer)"
  bash scripts/sanitize.sh
  echo "=== fuzzing the IDX and safetensors readers (60 s each)"
  bash scripts/fuzz.sh 60
fi
echo "=== all tests passed in $((SECONDS - start)) s"

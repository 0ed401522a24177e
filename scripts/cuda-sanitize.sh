#!/usr/bin/env bash
# Runs the GPU tests under compute-sanitizer: memcheck (with --leak-check full), racecheck, initcheck and
# synccheck, with the caching allocator bypassed (MINIDL_CUDA_NO_CACHE=1: every tensor is its own cudaMalloc, so
# an access past a tensor's end is past an allocation's end and memcheck sees it; initcheck sees fresh memory).
#
# Usage: scripts/cuda-sanitize.sh BUILD_DIR OUTDIR
#   BUILD_DIR  a CUDA build (-DMINIDL_WITH_CUDA=ON) with the tests built (BUILD_DIR/tests/test_*)
#   OUTDIR     gets one log per tool, binary and shard (TOOL.BINARY.SHARD.log), TOOL.reports.txt and summary.txt
# Prints one line per tool, "tool: N errors (A in minidl, B in cuDNN/cuBLAS/cuRAND/NCCL), M tests" with the
# third-party reports below it (scripts/sanitizer_report.py sorts them by the library of the innermost host
# frame), and exits non-zero when a test failed or a report is minidl's.
# Environment: COMPUTE_SANITIZER (the binary), MINIDL_SANITIZE_TOOLS (default all four), MINIDL_SANITIZE_SUBSET
# (the gtest filter of the slower tools, see below; `all` selects every GPU test), MINIDL_SANITIZE_JOBS (default 1: how many instrumented processes run at once; every tool's jobs share the
# queue, each binary's tests split into up to that many gtest shards, spread over all GPUs), MINIDL_SANITIZE_FIRST
# (the binaries to start first), MINIDL_SANITIZE_PER_TEST (binaries whose tests run as one job each instead of
# gtest shards: a shard holding two of the convolution reference tests, which run every cuDNN algorithm, took
# longer than a whole device call under racecheck; alone, each gets the call).
#
# What runs:
# - Tests are selected by name: every GPU test has Gpu, GPU or Cuda in its suite or test name.
# - Never under any tool: LargeTensorGpu.* (2^31-element tensors: minutes under instrumentation, and
#   initcheck/memcheck shadow memory for 30 GB), OpsGpu.OutOfMemoryIsAnException* (a real 128 TiB cudaMalloc
#   that fails on purpose: memcheck reports every failing CUDA API call as an error) and OomGpuDeathTest.*
#   (re-executes the binary in a child process), and the multi-process data-parallel tests
#   (DistributedDataParallel.*, DdpWorker.*: they start ranks of their own, outside the tool). The other
#   OomGpu tests stay: their out-of-memory comes from the allocator's per-process cap, no CUDA call fails, and
#   their error paths are worth checking for leaks and bad accesses.
# - memcheck runs every selected test. racecheck (shared-memory hazards), initcheck and synccheck are several
#   times slower, so by default they run a representative subset that launches every kernel family minidl has
#   (MINIDL_SANITIZE_SUBSET=all runs them on every GPU test too, with many jobs on a many-core machine):
#   OpsGpu (elementwise, reductions incl. the chunked sums, softmax, losses, transpose, random),
#   LayersGpu (cuDNN convolution and batch norm, pooling, dropout, linear), OptimGpu (multi-tensor updates),
#   CudaGraph (captured steps) and IndexSelectGpu (gathers). Left out there: DataLoaderGpu, CheckpointGpu,
#   GoldenMnist and the others, which only copy data or repeat those kernels.
# - --leak-check full reports device allocations still live when the CUDA context is destroyed. Under
#   MINIDL_CUDA_NO_CACHE=1 minidl destroys its cuBLAS/cuDNN handles and frees its workspaces at exit, so those
#   do not show. Seen on the H200 (2026-11-29) and counted as third-party: 3 allocations of 25,352 bytes in all
#   that cudnnCreate makes inside cuDNN and cudnnDestroy does not return, and in test_distributed 4 API errors
#   (cudaErrorNoKernelImageForDevice from cudaFuncGetAttributes) inside ncclCommInitRank.
# - racecheck runs with MINIDL_CUDNN_BENCHMARK=0 (cuda::set_cudnn_benchmark): the convolution search takes
#   cuDNN's heuristic pick instead of running every algorithm. Under racecheck on the H200 (cuDNN 9.14,
#   2026-11-30) cudnnFind's backward-weight search stopped with "Internal Sanitizer Error: The Sanitizer failed
#   to handle a hardware exception" and CUDNN_STATUS_INTERNAL_ERROR, even with only minidl's kernels
#   instrumented. The tests that check the timed search's report set the benchmark back on themselves.
set -uo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR OUTDIR" >&2
  exit 2
fi
build=$1
out=$2
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
tools=${MINIDL_SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
gpu_filter='*Gpu*:*GPU*:*Cuda*:*CUDA*'
excluded='LargeTensorGpu.*:OomGpuDeathTest.*:OpsGpu.OutOfMemoryIsAnException*:DistributedDataParallel.*:DdpWorker.*'
subset=${MINIDL_SANITIZE_SUBSET:-'OpsGpu*:LayersGpu*:OptimGpu*:CudaGraph*:IndexSelectGpu*'}
[[ $subset == all ]] && subset=$gpu_filter
jobs=${MINIDL_SANITIZE_JOBS:-1}
error_exit=86  # the sanitizer's exit status when it found errors, distinct from a failing test's 1

if [[ ! -x $sanitizer ]]; then
  echo "$0: compute-sanitizer not found (set COMPUTE_SANITIZER)" >&2
  exit 2
fi
shopt -s nullglob
binaries=("$build"/tests/test_*)
if [[ ${#binaries[@]} -eq 0 ]]; then
  echo "$0: no test binaries in $build/tests (build the tests first)" >&2
  exit 2
fi
mkdir -p "$out"
export MINIDL_CUDA_NO_CACHE=1
summary=$out/summary.txt
: >"$summary"
status=0

# The gtest filter of TOOL's tests.
tool_filter() {
  if [[ $1 == memcheck ]]; then echo "$gpu_filter-$excluded"; else echo "$subset-$excluded"; fi
}

# One instrumented process: TOOL BINARY SHARD SHARDS GPU, where SHARD is a shard index or "test=NAME" (one
# test alone). Writes its log and, in a .rc file, its exit status.
run_one() {
  local tool=$1 bin=$2 shard=$3 shards=$4 gpu=$5 filter extra=()
  filter=$(tool_filter "$tool")
  [[ $tool == memcheck ]] && extra=(--leak-check full)
  local label=$shard index=$shard
  if [[ $shard == test=* ]]; then
    filter=${shard#test=}
    label=${filter//\//_} index=0
  fi
  local log=$out/$tool.$(basename "$bin").$label.log
  export GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$index CUDA_VISIBLE_DEVICES=$gpu
  if [[ $tool == racecheck ]]; then export MINIDL_CUDNN_BENCHMARK=0; else unset MINIDL_CUDNN_BENCHMARK; fi
  "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode "$error_exit" --print-limit 200 \
    "$bin" --gtest_filter="$filter" --gtest_brief=1 >"$log" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]] && grep -q "terminated before first instrumented API call" "$log"; then
    # The selected tests made no CUDA call (e.g. test_diagnose's fakes): nothing for the tool to check, so
    # the binary's own result counts.
    "$bin" --gtest_filter="$filter" --gtest_brief=1 >>"$log" 2>&1
    rc=$?
  fi
  echo $rc >"$log.rc"
}
export -f run_one tool_filter
export sanitizer out gpu_filter excluded subset error_exit

# The full names of the tests a tool selects in a binary, one per line (gtest lists suites unindented, tests
# indented; a parameterised test's "  # GetParam() = ..." comment is dropped).
list_tests() {
  "$2" --gtest_filter="$(tool_filter "$1")" --gtest_list_tests 2>/dev/null |
    awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}'
}

for tool in $tools; do
  case $tool in memcheck | racecheck | initcheck | synccheck) ;; *) echo "$0: unknown tool $tool" >&2; exit 2 ;; esac
done
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[[ $gpus -gt 0 ]] || gpus=1
# The binaries with the longest tests under instrumentation go first, so they do not set the wall time alone at
# the end (measured on the H200: the convolution reference tests, a training run, the data-parallel tests).
first=${MINIDL_SANITIZE_FIRST:-test_gpu_kernels test_golden_mnist test_distributed test_oom_gpu test_layers_gpu test_optim}
ordered=()
for name in $first; do
  for bin in "${binaries[@]}"; do [[ $(basename "$bin") == "$name" ]] && ordered+=("$bin"); done
done
for bin in "${binaries[@]}"; do [[ " $first " == *" $(basename "$bin") "* ]] || ordered+=("$bin"); done

# Every tool's jobs in one queue, each binary split into at most `jobs` gtest shards, spread over the GPUs.
declare -A tests
start=$SECONDS
index=0
queue=$out/queue
: >"$queue"
per_test=" ${MINIDL_SANITIZE_PER_TEST:-} "
for bin in "${ordered[@]}"; do
  [[ -x $bin && -f $bin ]] || continue
  for tool in $tools; do
    mapfile -t names < <(list_tests "$tool" "$bin")
    n=${#names[@]}
    [[ $n -gt 0 ]] || continue
    tests[$tool]=$((${tests[$tool]:-0} + n))
    if [[ $per_test == *" $(basename "$bin") "* ]]; then
      for name in "${names[@]}"; do
        printf '%s\0%s\0%s\0%s\0%s\0' "$tool" "$bin" "test=$name" 1 $((index++ % gpus)) >>"$queue"
      done
      continue
    fi
    shards=$((n < jobs ? n : jobs))
    for ((shard = 0; shard < shards; ++shard)); do
      printf '%s\0%s\0%s\0%s\0%s\0' "$tool" "$bin" "$shard" "$shards" $((index++ % gpus)) >>"$queue"
    done
  done
done
xargs -0 -n 5 -P "$jobs" bash -c 'run_one "$@"' run_one <"$queue"

here=$(dirname "$0")
for tool in $tools; do
  errors=0 failed=() logs=("$out/$tool".*.log)
  for log in "${logs[@]}"; do
    # memcheck, initcheck and synccheck print "ERROR SUMMARY: N errors"; racecheck prints
    # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
    found=$(grep -Eo 'ERROR SUMMARY: [0-9]+|\([0-9]+ errors' "$log" | grep -Eo '[0-9]+' | awk '{s += $1} END {print s + 0}')
    rc=$(cat "$log.rc" 2>/dev/null || echo "none: not finished")
    if [[ $rc == "$error_exit" && $found -eq 0 ]]; then found=1; fi  # reported, though not in a summary line
    errors=$((errors + found))
    # A test that failed, crashed or never finished; the sanitizer's own exit status for errors is judged below.
    if [[ $rc != 0 && $rc != "$error_exit" ]]; then failed+=("$(basename "$log" .log)(exit $rc)"); fi
  done
  python3 "$here/sanitizer_report.py" "${logs[@]}" >"$out/$tool.reports.txt"
  third=$(sed -n 's/^third_party=\([0-9]*\).*/\1/p' "$out/$tool.reports.txt")
  ours=$((errors - ${third:-0}))
  line="$tool: $errors errors ($ours in minidl, ${third:-0} in cuDNN/cuBLAS/cuRAND/NCCL), ${tests[$tool]:-0} tests"
  line+=" ($((SECONDS - start)) s for all tools)"
  [[ ${#failed[@]} -eq 0 ]] || line+="; failed: ${failed[*]}"
  { echo "$line"; tail -n +2 "$out/$tool.reports.txt" | sort | uniq -c | sort -rn | head -20; } | tee -a "$summary"
  [[ $ours -eq 0 && ${#failed[@]} -eq 0 ]] || status=1
done
exit $status

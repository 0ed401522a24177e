#!/usr/bin/env bash
# Installs dependencies, builds minidl and trains the GPT example (examples/gpt) on tiny shakespeare, then
# samples from it. With a usable GPU it trains nanoGPT's shakespeare-char configuration there; on the CPU alone a
# small configuration (4 layers, 128 wide, context 64) for 2000 iterations. The metrics go to
# build/release/gpt_metrics.csv, their plot to build/release/gpt_metrics.png. Extra arguments go to gpt_train and
# replace those defaults, e.g. `bash scripts/train-gpt.sh --iters 2000 --eval-every 500`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/example-common.sh
build_examples gpt_train
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  if has_gpu; then
    args=(--device cuda --eval-every 500)
  else
    args=(--device cpu --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 32 --dropout 0
          --iters 2000 --warmup 50 --eval-every 250 --eval-iters 20)
  fi
fi
./build/release/examples/gpt/gpt_train --metrics build/release/gpt_metrics.csv --sample 500 --prompt "ROMEO:" \
  "${args[@]}"
plot_metrics build/release/gpt_metrics.csv build/release/gpt_metrics.png

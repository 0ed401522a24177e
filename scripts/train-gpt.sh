#!/usr/bin/env bash
# Installs dependencies, builds minidl and trains the GPT example (examples/gpt) on tiny shakespeare, then
# samples from it. With a usable GPU it trains nanoGPT's shakespeare-char configuration there; on the CPU alone a
# small configuration (4 layers, 128 wide, context 64) for 2000 iterations. The metrics go to
# build/release/gpt_metrics.csv, their plot to build/release/gpt_metrics.png. Extra arguments go to gpt_train and
# replace those defaults, e.g. `bash scripts/train-gpt.sh --iters 2000 --eval-every 500`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_BENCH=OFF > /dev/null
cmake --build build/release -j "$(nproc)" --target minidl_cli gpt_train
./build/release/tools/minidl info || true
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    args=(--device cuda --eval-every 500)
  else
    args=(--device cpu --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 32 --dropout 0
          --iters 2000 --warmup 50 --eval-every 250 --eval-iters 20)
  fi
fi
./build/release/examples/gpt/gpt_train --metrics build/release/gpt_metrics.csv --sample 500 --prompt "ROMEO:" \
  "${args[@]}"
# Debian's python3-matplotlib belongs to /usr/bin/python3 (another python3 may come first in PATH).
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" scripts/plot_metrics.py build/release/gpt_metrics.csv -o build/release/gpt_metrics.png ||
  echo "(no plot: see the message above)"

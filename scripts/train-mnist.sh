#!/usr/bin/env bash
# Installs dependencies (Fashion-MNIST from Debian's dataset-fashion-mnist among them), builds minidl and
# trains the MNIST CNN example. With a usable GPU it trains on the CPU and the GPU and compares them. The
# per-epoch metrics go to build/release/mnist_metrics.csv, their plot to build/release/mnist_metrics.png.
# Extra arguments go to mnist_train (default: --epochs 2), e.g. `bash scripts/train-mnist.sh --epochs 10`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_BENCH=OFF > /dev/null
cmake --build build/release -j "$(nproc)" --target minidl_cli mnist_train
./build/release/tools/minidl info || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--epochs 2)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  args+=(--compare)
fi
./build/release/examples/mnist/mnist_train --metrics build/release/mnist_metrics.csv "${args[@]}"
# Debian's python3-matplotlib belongs to /usr/bin/python3 (another python3 may come first in PATH).
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" scripts/plot_metrics.py build/release/mnist_metrics.csv -o build/release/mnist_metrics.png ||
  echo "(no plot: see the message above)"

#!/usr/bin/env bash
# Installs dependencies (Fashion-MNIST from Debian's dataset-fashion-mnist among them), builds minidl and
# trains the MNIST CNN example. With a usable GPU it trains on the CPU and the GPU and compares them. The
# per-epoch metrics go to build/release/mnist_metrics.csv, their plot to build/release/mnist_metrics.png.
# Extra arguments go to mnist_train (default: --epochs 2), e.g. `bash scripts/train-mnist.sh --epochs 10`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/example-common.sh
build_examples mnist_train
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--epochs 2)
if has_gpu; then
  args+=(--compare)
fi
./build/release/examples/mnist/mnist_train --metrics build/release/mnist_metrics.csv "${args[@]}"
plot_metrics build/release/mnist_metrics.csv build/release/mnist_metrics.png

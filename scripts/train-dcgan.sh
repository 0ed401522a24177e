#!/usr/bin/env bash
# Installs dependencies, builds minidl and trains the DCGAN example (examples/dcgan) on Fashion-MNIST padded to
# 32x32, writing a PNG grid of 64 generated garments after every epoch to build/release/dcgan-samples/ and the
# metrics to build/release/dcgan_metrics.csv. With a usable GPU it trains DCGAN's 5 epochs on all 60000 images
# there; on the CPU alone 5 epochs on the first 12800 images (100 steps of 128 per epoch). Extra arguments go to
# dcgan and replace those defaults, e.g. `bash scripts/train-dcgan.sh --device cpu --epochs 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_BENCH=OFF > /dev/null
cmake --build build/release -j "$(nproc)" --target minidl_cli dcgan
./build/release/tools/minidl info || true
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    args=(--device cuda --epochs 5)
  else
    args=(--device cpu --epochs 5 --train-limit 12800)
  fi
fi
./build/release/examples/dcgan/dcgan --samples-dir build/release/dcgan-samples \
  --metrics build/release/dcgan_metrics.csv "${args[@]}"

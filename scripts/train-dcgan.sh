#!/usr/bin/env bash
# Installs dependencies, builds minidl and trains the DCGAN example (examples/dcgan) on Fashion-MNIST padded to
# 32x32, writing a PNG grid of 64 generated garments after every epoch to build/release/dcgan-samples/ and the
# metrics to build/release/dcgan_metrics.csv. With a usable GPU it trains DCGAN's 5 epochs on all 60000 images
# there; on the CPU alone 5 epochs on the first 12800 images (100 steps of 128 per epoch). Extra arguments go to
# dcgan and replace those defaults, e.g. `bash scripts/train-dcgan.sh --device cpu --epochs 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/example-common.sh
build_examples dcgan
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  if has_gpu; then
    args=(--device cuda --epochs 5)
  else
    args=(--device cpu --epochs 5 --train-limit 12800)
  fi
fi
./build/release/examples/dcgan/dcgan --samples-dir build/release/dcgan-samples \
  --metrics build/release/dcgan_metrics.csv "${args[@]}"

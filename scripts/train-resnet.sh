#!/usr/bin/env bash
# Installs dependencies, builds minidl and trains the ResNet-18 example (examples/resnet) on Fashion-MNIST padded to
# 32x32, evaluating the 10000 test images after every epoch and writing the metrics to
# build/release/resnet_metrics.csv (plotted to build/release/resnet_metrics.png when matplotlib is present). With a
# usable GPU it trains ResNet-18 for 10 epochs on all 60000 images there; on the CPU alone a 4x narrower ResNet-18
# (--width 16, 1/16 of the work) for 5 epochs on the first 12800 images. Extra arguments go to resnet and replace
# those defaults, e.g. `bash scripts/train-resnet.sh --device cpu --epochs 2 --width 8`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/example-common.sh
build_examples resnet
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  if has_gpu; then
    args=(--device cuda --epochs 10)
  else
    args=(--device cpu --epochs 5 --width 16 --train-limit 12800)
  fi
fi
./build/release/examples/resnet/resnet --metrics build/release/resnet_metrics.csv "${args[@]}"
plot_metrics build/release/resnet_metrics.csv build/release/resnet_metrics.png

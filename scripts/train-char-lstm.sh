#!/usr/bin/env bash
# Installs dependencies, builds minidl and trains the LSTM character language model (examples/char_lstm) on tiny
# shakespeare, then samples from it. With a usable GPU its benchmark configuration (2 x 512, batch 64, 128 steps)
# for 10 epochs there; on the CPU alone a smaller one (embedding 64, 2 x 256, batch 32, 64 steps, 1000
# iterations). The metrics go to build/release/lstm_metrics.csv, their plot to build/release/lstm_metrics.png.
# Extra arguments go to char_lstm and replace those defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/example-common.sh
build_examples char_lstm
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  if has_gpu; then
    args=(--device cuda)
  else
    args=(--device cpu --embed 64 --hidden 256 --batch-size 32 --seq-len 64 --iters 1000 --eval-every 250)
  fi
fi
./build/release/examples/char_lstm/char_lstm --metrics build/release/lstm_metrics.csv --sample 500 --prompt "ROMEO:" \
  "${args[@]}"
plot_metrics build/release/lstm_metrics.csv build/release/lstm_metrics.png

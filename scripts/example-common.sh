# Sourced by the train-*.sh scripts: the set-up every example needs on a fresh machine and the plot at its end.
# Runs from the repository root (the scripts cd there first).

# Installs the dependencies, builds minidl's CLI and the given example targets in build/release (no tests, no
# benchmarks) and reports what minidl sees (driver, runtime, cuDNN, GPU).
build_examples() {
  bash scripts/install-deps.sh
  export PATH="/usr/local/cuda/bin:$PATH"
  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_BENCH=OFF > /dev/null
  cmake --build build/release -j "$(nproc)" --target minidl_cli "$@"
  ./build/release/tools/minidl info || true
}

# Whether a GPU is present (the examples pick it by themselves; this only chooses the defaults).
has_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU
}

# Draws the metrics CSV $1 into the PNG $2 with scripts/plot_metrics.py.
plot_metrics() {
  # Debian's python3-matplotlib belongs to /usr/bin/python3 (another python3 may come first in PATH).
  local python=/usr/bin/python3
  [ -x "$python" ] || python=python3
  "$python" scripts/plot_metrics.py "$1" -o "$2" || echo "(no plot: see the message above)"
}

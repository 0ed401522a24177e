#!/usr/bin/env bash
# Installs what minidl needs from Debian/Ubuntu packages (CUDA toolkit and cuDNN come from NVIDIA's
# repositories or an existing install; without them minidl builds CPU-only).
set -euo pipefail
packages=(cmake g++ make libeigen3-dev libspdlog-dev libcli11-dev nlohmann-json3-dev zlib1g-dev libgtest-dev
          libbenchmark-dev dataset-fashion-mnist python3-matplotlib
          clang libclang-rt-dev)  # clang + its runtime libraries (libFuzzer, sanitizers): scripts/fuzz.sh
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

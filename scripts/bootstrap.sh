#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages cubinrt builds against, only those missing.
# Idempotent: a second run installs nothing and says so. The CUDA Toolkit (nvcc) must already be on PATH.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libfmt-dev libzstd-dev liblz4-dev libssl-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-16 libclang-rt-16-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "bootstrap: all ${#packages[@]} packages already installed; nothing to do"
else
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "bootstrap: installed ${#missing[@]} package(s)"
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [[ -x $d/nvcc ]] && { echo "bootstrap: nvcc found at $d (not on PATH; the build finds it there)"; exit 0; }
  done
  echo "bootstrap: nvcc (CUDA Toolkit) is not on PATH and not under /usr/local/cuda; install the CUDA Toolkit first" >&2
  exit 1
fi
echo "bootstrap: nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"

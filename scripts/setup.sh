#!/usr/bin/env bash
# Installs every system dependency of seqmix from Debian packages, then configures and builds it in build/.
# Idempotent: packages already present are kept, the build is incremental. Prints what it did.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake g++ make pkg-config git
  libtorch-dev libopenblas0-pthread   # LibTorch 1.13; without OpenBLAS every matmul runs on the reference BLAS
  libgloo-dev                          # headers for c10d's ProcessGroupGloo
  libgtest-dev libbenchmark-dev        # tests and benchmarks
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libsentencepiece-dev
  ccache gnuplot-nox python3-torch
)

SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    echo "setup: not root and no sudo: cannot install packages" >&2; exit 1; fi
fi

echo "setup: apt-get update"
"${SUDO[@]}" apt-get update -qq

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages already installed"
fi

jobs=$(nproc 2>/dev/null || echo 2)
echo "setup: configuring build/ (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "setup: building with -j$jobs"
cmake --build build -j"$jobs"
echo "setup: done; try ./build/seqmix info"

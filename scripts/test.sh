#!/usr/bin/env bash
# Runs the fast test suite, installing and building first if needed.
# Extra arguments go to ctest: ./scripts/test.sh -R Causality, or ./scripts/test.sh -L slow for the slow label.
set -euo pipefail
cd "$(dirname "$0")/.."

deps_installed() {
  local p
  for p in libtorch-dev libopenblas0-pthread libgloo-dev libgtest-dev libbenchmark-dev libcli11-dev \
           libyaml-cpp-dev nlohmann-json3-dev libsentencepiece-dev gnuplot-nox python3-torch; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}

jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f build/CMakeCache.txt ] || ! deps_installed; then
  ./scripts/setup.sh
else
  cmake --build build -j"$jobs"
fi

label=(-L fast)
for a in "$@"; do case "$a" in -L|--label-regex|-LE) label=();; esac; done
exec ctest --test-dir build "${label[@]}" --output-on-failure -j"$jobs" "$@"

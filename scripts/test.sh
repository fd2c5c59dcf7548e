#!/usr/bin/env bash
# Runs the fast test suite, installing and building first if needed.
# Extra arguments go to ctest: ./scripts/test.sh -R Causality, or ./scripts/test.sh -L slow for the slow label.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dependencies.sh

jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f build/CMakeCache.txt ] || ! dependencies_installed; then
  ./scripts/setup.sh
else
  cmake --build build -j"$jobs"
fi

label=(-L fast)
for a in "$@"; do case "$a" in -L|--label-regex|-LE) label=();; esac; done
exec ctest --test-dir build "${label[@]}" --output-on-failure -j"$jobs" "$@"

#!/usr/bin/env bash
# The fast suite under AddressSanitizer and UndefinedBehaviorSanitizer, in its own build folder
# (build-sanitized). Any sanitizer report fails its test. Tests that need the tokenizer are left out:
# a sanitizer build cannot load the SentencePiece plugin (src/io/tokenizer.cpp says why). So are the Python
# tests: an instrumented libseqmix_ops.so cannot be loaded into an uninstrumented Python.
# Extra arguments go to ctest: ./scripts/test_sanitized.sh -R Safetensors
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SEQMIX_SANITIZED_BUILD:-build-sanitized}
jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEQMIX_SANITIZE=address,undefined \
        -DSEQMIX_BUILD_BENCH=OFF -DSEQMIX_NATIVE=ON
fi
cmake --build "$build" -j"$jobs"

# Leak detection is on. scripts/sanitizer/lsan.supp is where a third-party leak would be suppressed,
# with its reason; none is needed today.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizer/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec ctest --test-dir "$build" -L fast -LE "tokenizer|python" --output-on-failure -j"$jobs" "$@"

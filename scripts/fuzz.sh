#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan and UBSan) and runs each from its seed corpus in
# fuzz/corpus/<target> until it has run RUNS inputs (default 1e6) or SECONDS (default 600), whichever
# comes first. Inputs that crash, leak or hang are saved in
# build-fuzz/findings/<target>/ and fail the script. New corpus entries go to build-fuzz/corpus/<target>.
#   scripts/fuzz.sh [SECONDS] [target ...]     e.g. scripts/fuzz.sh 60 fuzz_csv;  RUNS=N sets the count
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
runs=${RUNS:-1000000}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors fuzz_checkpoint fuzz_config fuzz_spec fuzz_csv fuzz_tokenizer)
jobs=$(nproc 2>/dev/null || echo 2)

[ -f build/CMakeCache.txt ] || ./scripts/setup.sh
# libFuzzer comes with clang's runtime libraries: installed here, as only fuzzing needs them.
if ! command -v clang++ >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  SUDO=()
  [ "$(id -u)" = 0 ] || SUDO=(sudo)
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev
fi
cmake --build build -j"$jobs" --target seqmix_core seqmix_modules seqmix_sentencepiece
[ -f build-fuzz/CMakeCache.txt ] || cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizer/lsan.supp:print_suppressions=0}
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t" "fuzz/corpus/$t"
  log="build-fuzz/$t.log"
  # -timeout: an input running 10 s is a hang; -rss_limit_mb/-malloc_limit_mb: memory blow-ups are findings.
  if ./build-fuzz/"$t" -runs="$runs" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t/" \
       "build-fuzz/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    result=clean
  else
    result="FOUND A FAILURE (see $log and build-fuzz/findings/$t/)"
    status=1
  fi
  executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  took=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o '[0-9]* second' | grep -o '[0-9]*' || echo "$seconds")
  printf '%-18s %12s executions in %5s s  %s\n' "$t" "$executed" "$took" "$result"
done
exit $status

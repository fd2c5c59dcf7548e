#!/usr/bin/env bash
# smoke_config.sh SEQMIX CONFIG OUT [ARGS...]: trains CONFIG for the few steps ARGS ask for (tests/cli/results_smoke.cmake
# shrinks the task and the batch) into a fresh OUT, so that every config docs/results.md names keeps running.
set -euo pipefail
seqmix=$1 config=$2 out=$3
shift 3
rm -rf "$out"
exec "$seqmix" train --config "$config" --out "$out" "$@"

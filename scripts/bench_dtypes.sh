#!/bin/bash
# bf16 against fp32 for every registered mixer, measured in one run per mixer (`seqmix bench --model NAME --dtype
# bf16`: the forward under bfloat16 autocast over float32 weights, the backward outside it, as `seqmix train
# --dtype bf16` runs a step), printed as a markdown table of median times and bf16/fp32 ratios (below 1: bf16 is
# faster). Mixers with an impl option run their default (fused; the delta rule has naive only).
#   usage: scripts/bench_dtypes.sh [B,T,D=4,512,128] [THREADS=0] [REPEATS=11]
set -euo pipefail
seqmix="$(dirname "$0")/../build/seqmix"
[ -x "$seqmix" ] || { echo "bench_dtypes: $seqmix is missing; build first (scripts/test.sh builds)" >&2; exit 1; }
shape=${1:-4,512,128}
threads=${2:-0}
repeats=${3:-11}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
list=$("$seqmix" list)
mixers=$(echo "$list" | awk '/^Sequence mixers/ {on = 1; next} /^[A-Z]/ {on = 0} on && /^  [a-z0-9_]+  -/ {print $1}')
[ -n "$mixers" ] || { echo "bench_dtypes: seqmix list printed no mixers" >&2; exit 1; }
for m in $mixers; do
  # fused when the mixer's impl option offers it, else naive (the delta rule); nothing without the option.
  choices=$(echo "$list" | awk -v m="$m" '$1 == m && /  -  / {on = 1; next} /^  [a-z0-9_]+  -/ {on = 0}
                                          on && $1 ~ /^impl=/ {print $2; exit}')
  impl=()
  if [ -n "$choices" ]; then
    case "$choices" in *fused*) impl=(--impl fused) ;; *) impl=(--impl naive) ;; esac
  fi
  "$seqmix" bench --model "$m" "${impl[@]}" --shape "$shape" --backward --dtype bf16 --json --threads "$threads" \
    --repeats "$repeats" >> "$out"
done
python3 - "$out" "$shape" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
print(f"| mixer (shape {sys.argv[2]}) | fp32 fwd ms | bf16 fwd ms | bf16/fp32 | fp32 fwd+bwd ms | bf16 fwd+bwd ms | bf16/fp32 |")
print("|---|---|---|---|---|---|---|")
for fp32, bf16 in zip(rows[::2], rows[1::2]):
    assert fp32["model"] == bf16["model"] and (fp32["dtype"], bf16["dtype"]) == ("fp32", "bf16"), (fp32, bf16)
    print(f"| {fp32['model']} | {fp32['fwd_ms']:.2f} | {bf16['fwd_ms']:.2f} | {bf16['fwd_ms'] / fp32['fwd_ms']:.2f} | "
          f"{fp32['fwdbwd_ms']:.2f} | {bf16['fwdbwd_ms']:.2f} | {bf16['fwdbwd_ms'] / fp32['fwdbwd_ms']:.2f} |")
PY

#!/bin/bash
# bf16 against fp32 for every registered mixer (`seqmix bench --model NAME --dtype bf16`: the forward under
# bfloat16 autocast over float32 weights, the backward outside it, as `seqmix train --dtype bf16` runs a step). Each
# round times every mixer in fp32 and bf16 in one run; the table gives, per mixer, the median over the rounds of
# each time and of each round's bf16/fp32 ratio (below 1: bf16 is faster), and the ratios' range. On a shared
# 2-core machine single runs vary by a third, hence the rounds. Mixers with an impl option run fused (the delta
# rule: naive, all it has).
#   usage: scripts/bench_dtypes.sh [B,T,D=4,512,128] [THREADS=0] [REPEATS=11] [ROUNDS=3]
set -euo pipefail
seqmix="$(dirname "$0")/../build/seqmix"
[ -x "$seqmix" ] || { echo "bench_dtypes: $seqmix is missing; build first (scripts/test.sh builds)" >&2; exit 1; }
shape=${1:-4,512,128}
threads=${2:-0}
repeats=${3:-11}
rounds=${4:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
list=$("$seqmix" list)
mixers=$(echo "$list" | awk '/^Sequence mixers/ {on = 1; next} /^[A-Z]/ {on = 0} on && /^  [a-z0-9_]+  -/ {print $1}')
[ -n "$mixers" ] || { echo "bench_dtypes: seqmix list printed no mixers" >&2; exit 1; }
for ((round = 0; round < rounds; round++)); do
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
done
python3 - "$out" "$shape" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
pairs = {}
for fp32, bf16 in zip(rows[::2], rows[1::2]):
    assert fp32["model"] == bf16["model"] and (fp32["dtype"], bf16["dtype"]) == ("fp32", "bf16"), (fp32, bf16)
    pairs.setdefault(fp32["model"], []).append((fp32, bf16))
med = statistics.median
print(f"| mixer (shape {sys.argv[2]}, median of {sys.argv[3]} runs) | fp32 fwd ms | bf16 fwd ms | bf16/fp32 fwd (range) | "
      "fp32 fwd+bwd ms | bf16 fwd+bwd ms | bf16/fp32 fwd+bwd (range) |")
print("|---|---|---|---|---|---|---|")
for model, runs in pairs.items():
    cells = [model]
    for key in ("fwd_ms", "fwdbwd_ms"):
        ratios = [b[key] / f[key] for f, b in runs]
        cells += [f"{med(f[key] for f, _ in runs):.2f}", f"{med(b[key] for _, b in runs):.2f}",
                  f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"]
    print("| " + " | ".join(cells) + " |")
PY

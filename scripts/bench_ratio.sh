#!/bin/bash
# Compares two `seqmix bench` cases fairly on a noisy machine: alternates them ROUNDS times (A, B, A, B,
# ...) so both see the same background load, and prints the median forward and forward+backward times of
# each and their ratio B / A.
#   usage: scripts/bench_ratio.sh "<bench args of A>" "<bench args of B>" [ROUNDS=5]
#   e.g.:  scripts/bench_ratio.sh "--op attention --shape 4,1024,8,64,64 --impl fused" \
#                                 "--op fem_softmax_read --shape 4,1024,8,64,32 --impl fused"
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 \"<bench args A>\" \"<bench args B>\" [ROUNDS]" >&2; exit 2; }
seqmix="$(dirname "$0")/../build/seqmix"
[ -x "$seqmix" ] || { echo "bench_ratio: $seqmix is missing; build first (scripts/test.sh builds)" >&2; exit 1; }
rounds=${3:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  # shellcheck disable=SC2086
  "$seqmix" bench $1 --backward --json | sed 's/^/A /' >> "$out"
  # shellcheck disable=SC2086
  "$seqmix" bench $2 --backward --json | sed 's/^/B /' >> "$out"
done
python3 - "$out" "$1" "$2" "$rounds" <<'PY'
import json, statistics, sys
rows = {"A": [], "B": []}
for line in open(sys.argv[1]):
    side, text = line.split(" ", 1)
    rows[side].append(json.loads(text))
for side in rows:
    if len(rows[side]) != int(sys.argv[4]):
        sys.exit(f"bench_ratio: side {side} printed {len(rows[side])} cases for {sys.argv[4]} rounds; "
                 "give each side one case (e.g. --impl fused)")
def med(side, key): return statistics.median(r[key] for r in rows[side])
for side, args in (("A", sys.argv[2]), ("B", sys.argv[3])):
    print(f"{side}: {args}: fwd {med(side, 'fwd_ms'):.1f} ms, fwd+bwd {med(side, 'fwdbwd_ms'):.1f} ms "
          f"(median of {len(rows[side])})")
print(f"B / A: fwd {med('B', 'fwd_ms') / med('A', 'fwd_ms'):.2f}x, "
      f"fwd+bwd {med('B', 'fwdbwd_ms') / med('A', 'fwdbwd_ms'):.2f}x")
PY

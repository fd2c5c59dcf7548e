#!/usr/bin/env bash
# Re-runs the cheap tables of docs/results.md with three model seeds (`seqmix train --seeds 0,1,2`): the argmax toy
# at the small size and ETTh1 at horizon 96. Each run goes to OUT/<name>/seed-S (rerunning resumes unfinished seeds)
# and each table's mean ± sample std is printed from OUT/<name>/seeds.json.
#   scripts/three_seeds.sh [OUT (default runs/three_seeds)] [THREADS (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/three_seeds}
threads=${2:-2}
seqmix=./build/seqmix
[ -x "$seqmix" ] || { echo "three_seeds: build seqmix first (scripts/setup.sh)" >&2; exit 1; }
run() {  # run NAME CONFIG
  echo "== $1: seqmix train --config $2 --seeds 0,1,2"
  "$seqmix" train --config "$2" --seeds 0,1,2 --threads "$threads" --out "$out/$1" | sed -n '/over seeds/,$p'
}
run argmax_fem configs/argmax_fem.yaml
run argmax_softmax configs/argmax_softmax.yaml
for m in dlinear softmax fem_softmax fem_gla; do run "etth1_$m" "configs/ett/etth1_$m.yaml"; done

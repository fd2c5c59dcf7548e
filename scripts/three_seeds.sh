#!/usr/bin/env bash
# Re-runs the tables of docs/results.md whose claims need more than one seed, with three model seeds each:
#   argmax        the argmax toy at the small size           (seqmix train --seeds 0,1,2)
#   etth1         ETTh1 at horizon 96: DLinear and the three forecasters (FEM's at softmax's parameter count)
#   mad_fem       MAD fuzzy recall and compression: FEM-SM (matched), its softmax ablation, softmax  (mad --seeds)
#   mad_hyperglu  MAD, all six tasks: HyperMLP R-cg-q-12o and HyperGLU G-cg-q-12o
#   mad_lag       MAD, all six tasks: R-12! and R-12o!
#   mad_table     the MAD rows above as one table over the seeds (trains nothing)
#   lm            the Tiny Shakespeare table, all eleven models (FEM's at MHA's parameter count)
#   lm_table      the finished Tiny Shakespeare models as one markdown table over the seeds (trains nothing)
#   summary       one line per finished table: the mean ± sample std of its seeds
# A train table goes to OUT/<name>/seed-S, the MAD runs to OUT/mad; rerunning continues unfinished runs. MAD's
# seed 12345 is the single-seed table's: its kept records (docs/runs/mad-cpu) are copied in and reused.
#   scripts/three_seeds.sh [OUT (default runs/three_seeds)] [THREADS (default 2)] [PART ... (default: all, in order)]
# Two parts can run side by side on different cores (e.g. THREADS 1 and parts mad_fem and lm in two shells).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/three_seeds}
threads=${2:-2}
shift $(($# < 2 ? $# : 2))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(argmax etth1 mad_fem mad_hyperglu mad_lag mad_table lm lm_table summary)
for part in "${parts[@]}"; do
  case $part in
    argmax | etth1 | mad_fem | mad_hyperglu | mad_lag | mad_table | lm | lm_table | summary) ;;
    *) echo "three_seeds: unknown part '$part'; parts: argmax etth1 mad_fem mad_hyperglu mad_lag mad_table lm lm_table summary" >&2
       exit 1 ;;
  esac
done
seqmix=${SEQMIX:-./build/seqmix}
need_seqmix() { [ -x "$seqmix" ] || { echo "three_seeds: build seqmix first (scripts/setup.sh)" >&2; exit 1; }; }

train_seeds() {  # NAME CONFIG [seqmix train options]
  local name=$1 config=$2
  shift 2
  need_seqmix
  echo "== $name: seqmix train --config $config $* --seeds 0,1,2"
  "$seqmix" train --config "$config" "$@" --seeds 0,1,2 --threads "$threads" --out "$out/$name" |
    awk '/^matched/ && !shown++ { print } /over seeds/ { table = 1 } table'  # what --match-params chose, the table
}
# FEM rows are held at their baseline's parameter count (within 0.5%) by solving FEM's query/key width.
matched_to() { echo --match-params "$1" --match-option mixer.qk_dim; }

# FEM-SM at softmax's 407,184 parameters: qk_dim 112 gives 406,136 on the recall backbone (seqmix train --mixer
# fem:prior=softmax --match-params softmax --match-option mixer.qk_dim); its ablation to softmax attention is smaller.
mad_fem=("fem:prior=softmax,qk_dim=112" "fem:prior=softmax,flags=" softmax)
mad_hyperglu=("hypermlp:variant=R-cg-q-12o,mix_rank=8" "hyperglu:variant=G-cg-q-12o,mix_rank=8")
mad_lag=("hypermlp:variant=R-12!" "hypermlp:variant=R-12o!")
mad_seeds() {  # [seqmix mad options] -- MIXER ...
  local options=() mixers=()
  need_seqmix
  while [ "$1" != -- ]; do options+=("$1"); shift; done
  shift
  for m in "$@"; do mixers+=(--mixer "$m"); done
  mkdir -p "$out/mad"
  local kept run
  for kept in docs/runs/mad-cpu/mixers/*/mad.*/*/; do  # seed 12345: the single-seed table's runs, run by run
    run=$out/mad/${kept#docs/runs/mad-cpu/mixers/}
    [ -d "$run" ] || { mkdir -p "$(dirname "$run")" && cp -r "$kept" "$run"; }
  done
  "$seqmix" mad --preset cpu --seeds 12345,1,2 "${mixers[@]}" "${options[@]}" --out "$out/mad" | sed -n '/^| mixer/,$p'
}

lm_models=(mha fem_sm fem_gla hyperglu mha2nd1st ela_gpt ela_gpt_lobe momenmha nagmha light2nd1st ela_gpt_bidir_lobe)
declare -A lm_labels=(  # the row names of docs/results.md's Tiny Shakespeare tables
  [mha]="MHA (softmax attention, RoPE)" [fem_sm]="FEM-SM (\`fem:prior=softmax\`), matched"
  [fem_gla]="FEM-GLA (\`fem:prior=gla\`), matched" [hyperglu]="HyperGLU (\`G-cg-q-12o\`, \`mix_rank=8\`)"
  [mha2nd1st]="MHA2nd1st" [ela_gpt]="ELA-GPT, no Memory Lobe" [ela_gpt_lobe]="ELA-GPT, causal Memory Lobe"
  [momenmha]="MomenMHA (\`residual=momentum\`)" [nagmha]="NagMHA (\`residual=nesterov\`)"
  [light2nd1st]="LightMHA2nd1st" [ela_gpt_bidir_lobe]="ELA-GPT, bidirectional lobe (leaks)")

for part in "${parts[@]}"; do
  case $part in
    argmax)
      train_seeds argmax_fem configs/argmax_fem.yaml
      train_seeds argmax_softmax configs/argmax_softmax.yaml ;;
    etth1)
      for m in dlinear softmax; do train_seeds "etth1_$m" "configs/ett/etth1_$m.yaml"; done
      for m in fem_softmax fem_gla; do
        train_seeds "etth1_$m" "configs/ett/etth1_$m.yaml" $(matched_to configs/ett/etth1_softmax.yaml)
      done ;;
    mad_fem)
      echo "== MAD fuzzy recall and compression, FEM's rows, seeds 12345,1,2"
      mad_seeds --task mad.fuzzy_recall --task mad.compression --threads "$threads" --quiet -- "${mad_fem[@]}" ;;
    mad_hyperglu)
      echo "== MAD, R-cg-q-12o and HyperGLU, seeds 12345,1,2"
      mad_seeds --threads "$threads" --quiet -- "${mad_hyperglu[@]}" ;;
    mad_lag)
      echo "== MAD, R-12! and R-12o!, seeds 12345,1,2"
      mad_seeds --threads "$threads" --quiet -- "${mad_lag[@]}" ;;
    mad_table)
      echo "== MAD rows over seeds 12345,1,2 (a dash: a task not rerun, or not finished)"
      mad_seeds --finished-only -- "${mad_fem[@]}" "${mad_hyperglu[@]}" "${mad_lag[@]}" ;;
    lm)
      for m in "${lm_models[@]}"; do
        case $m in
          fem_*) train_seeds "lm_$m" "configs/lm/$m.yaml" $(matched_to configs/lm/mha.yaml) ;;
          *) train_seeds "lm_$m" "configs/lm/$m.yaml" ;;
        esac
      done ;;
    lm_table)
      tables=() unfinished=()
      for m in "${lm_models[@]}"; do
        if [ -f "$out/lm_$m/seeds.json" ]; then tables+=("$out/lm_$m=${lm_labels[$m]}"); else unfinished+=("$m"); fi
      done
      if [ ${#tables[@]} -eq 0 ]; then echo "three_seeds: no Tiny Shakespeare model has finished its seeds in $out" >&2; exit 1; fi
      [ ${#unfinished[@]} -eq 0 ] || echo "three_seeds: lm_table leaves out the unfinished ${unfinished[*]}" >&2
      baseline=()
      if [ -f "$out/lm_mha/seeds.json" ]; then baseline=(--baseline "$out/lm_mha")
      else echo "three_seeds: lm_table has no baseline column: mha has not finished" >&2; fi
      python3 scripts/seeds_table.py "${baseline[@]}" "${tables[@]}" ;;
    summary)
      for f in "$out"/*/seeds.json; do
        [ -f "$f" ] || continue
        python3 - "$f" <<'EOF'
import json, sys
path = sys.argv[1]
t = json.load(open(path))
cells = ", ".join(f"{k} {t['mean'][k]:.4f} ± {t['std'][k]:.4f}" for k in sorted(t["mean"]))
print(f"{path.split('/')[-2]}: seeds {','.join(map(str, t['seeds']))}: {cells}")
EOF
      done ;;
  esac
done

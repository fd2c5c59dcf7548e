#!/usr/bin/env bash
# The MAD table of docs/results.md (FEM Table 1, HyperMLP Table 1, the energy paper's MAD rows): every mixer
# row, then MomenMHA and NagMHA (softmax attention in momentum and Nesterov residual blocks).
# Usage: scripts/mad_table.sh OUT_DIR [seqmix mad options: --preset paper, --threads N, --task T, --max-steps N, ...]
# Finished runs in OUT_DIR are reused, so an interrupted table continues where it stopped; with
# --finished-only nothing is trained and the table shows what has finished (a dash for the rest).
# SEQMIX names the binary (default: build/seqmix of this checkout).
set -euo pipefail
out=${1:?usage: scripts/mad_table.sh OUT_DIR [seqmix mad options]}
shift
seqmix=${SEQMIX:-$(dirname "$0")/../build/seqmix}
[ -x "$seqmix" ] || { echo "mad_table: $seqmix is missing; build first (scripts/test.sh builds)" >&2; exit 1; }
# Labels are HyperMLP Table 1's (p: RoPE, c: KV convolution; 2 heads, as the paper fixes); the MAD backbone
# has no other position signal.
mixers=(
  softmax                                  # softmax attention, 4 heads, RoPE: MomenMHA's and NagMHA's baseline
  "hypermlp:variant=S"                     # S
  "hypermlp:variant=S-pc"                  # S-pc
  "hypermlp:variant=R"                     # R
  "hypermlp:variant=R-pc"                  # R-pc
  "fem:prior=softmax"                      # FEM-SM (flags CLTG)
  "fem:prior=softmax,flags=CLT"            # FEM-SM -G
  "fem:prior=softmax,flags=CL"             # -G,T
  "fem:prior=softmax,flags=C"              # -G,T,L
  "fem:prior=softmax,flags="               # -G,T,L,C
  "fem:prior=gla"                          # FEM-GLA
  "hypermlp:variant=R-cg-q-12o,mix_rank=8" # HyperMLP (mix_rank 8 leaves QK rank at 128 wide, 64 long)
  "hyperglu:variant=G-cg-q-12o,mix_rank=8" # HyperGLU
  "hypermlp:variant=R-12!"                 # lag ablation: forward layout
  "hypermlp:variant=R-12o!"                #               lag layout
  "ela:kernel=hadamard_exp"                # ELA, Hadamard Exp kernel
  "ela:kernel=sum_sq_euclidean"            # ELA, summation kernel ||q+k||^2
)
args=()
for m in "${mixers[@]}"; do args+=(--mixer "$m"); done
for a in "$@"; do
  if [ "$a" = --finished-only ]; then  # tabulate what has finished: the table's three parts may not have started
    [ -d "$out" ] || { echo "mad_table: --finished-only tabulates the runs in $out, which is not a directory" >&2; exit 1; }
    mkdir -p "$out/mixers" "$out/momenmha" "$out/nagmha"
  fi
done
"$seqmix" mad "${args[@]}" --out "$out/mixers" "$@"
"$seqmix" mad --mixer softmax --residual momentum --out "$out/momenmha" "$@"
"$seqmix" mad --mixer softmax --residual nesterov --out "$out/nagmha" "$@"

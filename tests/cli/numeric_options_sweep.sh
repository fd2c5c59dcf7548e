#!/usr/bin/env bash
# numeric_options_sweep.sh SEQMIX WORKDIR: every numeric key of a run's config (the [int] and [real] keys `seqmix
# list` prints under "Run config") and every numeric flag of every command (the INT, UINT and FLOAT options its
# --help lists), each fed NaN, inf and -inf, and the cheap ones 0 and a huge value too. No seqmix option gives NaN or
# an infinity a meaning, so those must be refused: exit status 1, exactly one line on stderr naming the key or flag,
# and no run folder left. 0 or a huge value may be refused the same way or taken (the command runs: a one-step
# training of a tiny task). The spec options of every registered component are swept in-process by
# tests/io/numeric_options_test.cpp. Prints one row per case and "N options, M cases, K failed".
set -u
seqmix=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
nonfinite=(nan inf -inf)
values=("${nonfinite[@]}" 0 9223372036854775807)
failed=() count=0 options=0

# check NAME NEEDLE OUT ARGS...: runs seqmix ARGS; a refusal must name NEEDLE in one line and leave OUT absent; with
# must_refuse=1 (a non-finite value) taking it fails.
must_refuse=0
check() {
  local name=$1 needle=$2 out=$3
  shift 3
  count=$((count + 1))
  rm -rf "$out"
  local err code lines
  err=$(timeout 120 "$seqmix" "$@" 2>&1 >/dev/null)
  code=$?
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [ "$code" -eq 0 ] && [ "$must_refuse" = 1 ]; then
    failed+=("$name")
    printf 'FAIL %-40s taken, but NaN and infinities mean nothing to any seqmix option\n' "$name"
  elif [ "$code" -eq 0 ]; then
    printf 'ok   %-40s taken\n' "$name"
  elif [ "$code" -ge 128 ] || [ "$lines" -ne 1 ] || ! printf '%s\n' "$err" | grep -qF -- "$needle"; then
    failed+=("$name")
    printf 'FAIL %-40s exit %3d, %d lines: %s\n' "$name" "$code" "$lines" "$(printf '%s' "$err" | head -c 400)"
  elif [ -e "$out" ]; then
    failed+=("$name")
    printf 'FAIL %-40s refused, but left %s behind\n' "$name" "$out"
  else
    printf 'ok   %-40s %s\n' "$name" "$err"
  fi
}

tiny=(--task mad.in_context_recall:seq_len=16,num_train=16,num_test=4 --mixer softmax:heads=2 --set model=lm:dim=16
      --batch-size 4 --eval-every 0 --threads 1)

# The run config's numeric keys, as `seqmix list` declares them.
keys=$("$seqmix" list | awk '/^Run config/ {on = 1; next} on && /\[(int|real)\]/ {split($1, kv, "="); print kv[1]}')
[ -n "$keys" ] || { echo "FAIL seqmix list printed no numeric config keys"; exit 1; }
for key in $keys; do
  options=$((options + 1))
  steps=(--steps 1)
  [ "$key" = train.steps ] && steps=()
  for value in "${values[@]}"; do
    must_refuse=0
    [[ " ${nonfinite[*]} " == *" $value "* ]] && must_refuse=1
    check "$key=$value" "$key" "$work/run" train "${tiny[@]}" "${steps[@]}" --set "$key=$value" --out "$work/run"
  done
done

# The commands' numeric flags, from each command's --help (CLI11's INT, UINT and FLOAT options), so a new flag is
# swept as soon as it exists. Each command runs from a base that works (a one-step run of a text task for generate
# and eval; any text file will do). Every flag gets the non-finite values; the ones in `cheap` (a taken value runs
# in a second) get 0 and the huge value too.
run="$work/base"
text=$(dirname "$0")/../data/ett_tiny.csv
"$seqmix" train --task "text:path=$text,seq_len=8,vocab_size=300,num_test=4" --mixer softmax:heads=2 \
  --set model=lm:dim=16 --batch-size 4 --eval-every 0 --threads 1 --steps 1 --out "$run" >/dev/null 2>&1 ||
  { echo "FAIL the base run did not train"; exit 1; }
declare -A base=(
  [generate]="generate --run $run --tokens 2"
  [eval]="eval --run $run"
  [bench]="bench --op gla --shape 1,4,1,2,2 --repeats 1 --warmup 0"
  [train]="train ${tiny[*]} --steps 1 --out $work/run"
  [mad]="mad --mixer softmax:heads=2 --task in_context_recall --max-steps 1 --quiet --out $work/run"
  [info]="info"
)
cheap=(generate:--tokens generate:--temperature generate:--top-k generate:--samples eval:--step bench:--repeats
       bench:--warmup bench:--threads train:--nproc)
commands=$("$seqmix" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}')
for command_name in $commands; do
  flags=$("$seqmix" "$command_name" --help | awk '$1 ~ /^--/ && $2 ~ /^(INT|UINT|FLOAT)/ {print $1}')
  [ -n "$flags" ] || continue
  [ -n "${base[$command_name]:-}" ] || { failed+=("$command_name"); echo "FAIL $command_name has numeric flags and no base command here"; continue; }
  for flag in $flags; do
    read -r -a given <<<"${base[$command_name]}"
    command=()  # the base without the swept flag's own value (mad's --max-steps)
    for ((i = 0; i < ${#given[@]}; i++)); do
      if [ "${given[i]}" = "$flag" ]; then i=$((i + 1)); else command+=("${given[i]}"); fi
    done
    # --dist-timeout matters only when joining a job.
    [ "$flag" = --dist-timeout ] && command+=(--dist-init "file://$work/store" --rank 0 --world-size 1)
    options=$((options + 1))
    swept=("${nonfinite[@]}")
    [[ " ${cheap[*]} " == *" $command_name:$flag "* ]] && swept=("${values[@]}")
    for value in "${swept[@]}"; do
      must_refuse=0
      [[ " ${nonfinite[*]} " == *" $value "* ]] && must_refuse=1
      check "$flag $value ($command_name)" "${flag#--}" "$work/run" "${command[@]}" "$flag" "$value"
    done
  done
done

echo "$options options, $count cases, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]

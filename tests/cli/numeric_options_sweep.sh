#!/usr/bin/env bash
# numeric_options_sweep.sh SEQMIX WORKDIR: every numeric key of a run's config (the [int] and [real] keys `seqmix
# list` prints under "Run config") and the numeric flags of the commands, each fed NaN, inf, -inf, 0 and a huge
# value. A value the command refuses must give exit status 1, exactly one line on stderr naming the key or flag, and
# leave no run folder; a value it takes must run (a one-step training of a tiny task). The spec options of every
# registered component are swept in-process by tests/io/numeric_options_test.cpp. Prints one row per case and
# "N options, M cases, K failed".
set -u
seqmix=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
values=(nan inf -inf 0 9223372036854775807)
failed=() count=0 options=0

# check NAME NEEDLE OUT ARGS...: runs seqmix ARGS; a refusal must name NEEDLE in one line and leave OUT absent.
check() {
  local name=$1 needle=$2 out=$3
  shift 3
  count=$((count + 1))
  rm -rf "$out"
  local err code lines
  err=$(timeout 120 "$seqmix" "$@" 2>&1 >/dev/null)
  code=$?
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [ "$code" -eq 0 ]; then
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
    check "$key=$value" "$key" "$work/run" train "${tiny[@]}" "${steps[@]}" --set "$key=$value" --out "$work/run"
  done
done

# The commands' numeric flags (CLI11 parses the integer ones; what it cannot convert names the flag too), against a
# one-step run of a text task (any text file will do).
run="$work/base"
text=$(dirname "$0")/../data/ett_tiny.csv
"$seqmix" train --task "text:path=$text,seq_len=8,vocab_size=300,num_test=4" --mixer softmax:heads=2 \
  --set model=lm:dim=16 --batch-size 4 --eval-every 0 --threads 1 --steps 1 --out "$run" >/dev/null 2>&1 ||
  { echo "FAIL the base run did not train"; exit 1; }
flag_cases=(
  "--tokens|generate --run $run --tokens"
  "--temperature|generate --run $run --temperature"
  "--top-k|generate --run $run --top-k"
  "--samples|generate --run $run --samples"
  "--step|eval --run $run --step"
  "--repeats|bench --op gla --shape 1,4,1,2,2 --repeats"
  "--warmup|bench --op gla --shape 1,4,1,2,2 --warmup"
  "--threads|bench --op gla --shape 1,4,1,2,2 --threads"
  "--nproc|train ${tiny[*]} --steps 1 --out $work/run --nproc"
  "--dist-timeout|train ${tiny[*]} --steps 1 --out $work/run --dist-init file://$work/store --rank 0 --world-size 1 --dist-timeout"
)
for entry in "${flag_cases[@]}"; do
  flag=${entry%%|*}
  read -r -a command <<<"${entry#*|}"
  options=$((options + 1))
  for value in "${values[@]}"; do
    check "$flag $value (${command[0]})" "${flag#--}" "$work/run" "${command[@]}" "$value"
  done
done

echo "$options options, $count cases, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]

#!/usr/bin/env bash
# kill_many.sh SEQMIX WORKDIR [KILLS]: a run killed KILLS times (default 20) with SIGKILL, each time resumed,
# ends with a final checkpoint byte-identical (model, optimizer state, RNG) to an uninterrupted run's.
# Odd kills strike at a random moment after the run has made progress (a new checkpoint, then a random
# delay of 0-9 ms); even kills strike inside a file write: SEQMIX_FAULT_KILL_AT_WRITE makes the K-th atomic write of
# the process (K random in 1..6: checkpoint tensors and records, metrics.jsonl) write half its content,
# then SIGKILL itself. After every kill the run directory must hold a loadable latest checkpoint (seqmix
# eval reads it) whenever it holds any.
set -u
seqmix=$1
work=$2
kills=${3:-20}
RANDOM=12345  # reproducible K values and delays (when a delay ends still depends on the machine's speed)
rm -rf "$work"
mkdir -p "$work"
args=(train --task mad.in_context_recall:seq_len=16,num_train=256,num_test=16 --mixer softmax:heads=2
      --set model=lm:dim=32 --steps 600 --eval-every 100 --set train.checkpoint_every=5 --set train.target=0
      --threads 1)
"$seqmix" "${args[@]}" --out "$work/full" >/dev/null || { echo "uninterrupted run failed"; exit 1; }
final=$(ls "$work/full/checkpoints" | grep 'safetensors$' | tail -1)
run="$work/killed"

latest_checkpoint() { ls "$run/checkpoints" 2>/dev/null | grep '\.json$' | tail -1; }

in_write=0
for k in $(seq 1 "$kills"); do
  if [ -f "$run/summary.json" ]; then echo "the run finished after $((k - 1)) kills; make it longer"; exit 1; fi
  if [ -f "$run/config.yaml" ]; then cmd=("$seqmix" train --resume "$run" --threads 1); else cmd=("$seqmix" "${args[@]}" --out "$run"); fi
  before=$(latest_checkpoint)
  if [ $((k % 2)) -eq 0 ]; then
    at=$((RANDOM % 6 + 1))
    (SEQMIX_FAULT_KILL_AT_WRITE=$at exec "${cmd[@]}" >/dev/null 2>&1) 2>/dev/null  # no "Killed" notice
    status=$?
    [ "$status" -eq 137 ] || { echo "kill $k: the write fault did not kill the run (exit $status)"; exit 1; }
    in_write=$((in_write + 1))
  else
    "${cmd[@]}" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 2000); do  # until a checkpoint newer than before exists (or the run ended)
      [ "$(latest_checkpoint)" != "$before" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.01
    done
    sleep "0.00$((RANDOM % 10))"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    status=$?
    [ "$status" -eq 137 ] || { echo "kill $k: the run ended by itself before the kill (exit $status)"; exit 1; }
  fi
  if [ -n "$(latest_checkpoint)" ]; then
    "$seqmix" eval --run "$run" --threads 1 >/dev/null 2>"$work/eval.err" ||
      { echo "kill $k: the latest checkpoint does not load: $(cat "$work/eval.err")"; exit 1; }
  fi
done
"$seqmix" train --resume "$run" --threads 1 >/dev/null || { echo "the final resume failed"; exit 1; }
if ls -a "$run" "$run/checkpoints" | grep -q '\.tmp-'; then echo "temporary files of killed writes are left"; exit 1; fi
if ! cmp -s "$work/full/checkpoints/$final" "$run/checkpoints/$final"; then echo "final checkpoints differ"; exit 1; fi
echo "$kills kills ($in_write inside a write): final checkpoints are byte-identical"

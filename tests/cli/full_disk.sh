#!/usr/bin/env bash
# full_disk.sh SEQMIX WORKDIR: the disk fills up (SEQMIX_FAULT_DISK_BYTES) while the second checkpoint is
# written. The run stops with one line naming the file and the cause and a non-zero exit; the first
# checkpoint stays the latest and loads, no temporary file is left, and once there is room again the resumed
# run ends byte-identical to an uninterrupted one.
set -u
seqmix=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
args=(train --task mad.in_context_recall:seq_len=16,num_train=256,num_test=16 --mixer softmax:heads=2
      --set model=lm:dim=32 --steps 20 --eval-every 10 --set train.checkpoint_every=5 --set train.target=0
      --set train.keep_checkpoints=10 --threads 1)
"$seqmix" "${args[@]}" --out "$work/full" >/dev/null || { echo "uninterrupted run failed"; exit 1; }
c=$work/full/checkpoints
size() { stat -c %s "$1"; }
# Room for config.yaml, the step-5 checkpoint (record, weights, optimizer state) and half of the step-10 weights.
room=$(( $(size "$work/full/config.yaml") + $(size "$c/step-00000005.json") + $(size "$c/step-00000005.safetensors") \
         + $(size "$c/step-00000005.optimizer.safetensors") + $(size "$c/step-00000010.safetensors") / 2 ))
run=$work/full_disk
SEQMIX_FAULT_DISK_BYTES=$room "$seqmix" "${args[@]}" --out "$run" >/dev/null 2>"$work/err"
status=$?
[ "$status" -ne 0 ] && [ "$status" -lt 128 ] || { echo "expected a clean non-zero exit, got $status"; exit 1; }
[ "$(grep -c . "$work/err")" -eq 1 ] || { echo "expected one line on stderr:"; cat "$work/err"; exit 1; }
grep -q "cannot write .*step-00000010.safetensors: No space left on device; the file was not created" "$work/err" ||
  { echo "unexpected message: $(cat "$work/err")"; exit 1; }
latest=$(ls "$run/checkpoints" | grep '\.json$' | tail -1)
[ "$latest" = "step-00000005.json" ] || { echo "latest checkpoint is '$latest', not step 5"; exit 1; }
"$seqmix" eval --run "$run" --threads 1 >/dev/null || { echo "the step-5 checkpoint does not load"; exit 1; }
if ls -a "$run" "$run/checkpoints" | grep -q '\.tmp-'; then echo "the failed write left a temporary file"; exit 1; fi
"$seqmix" train --resume "$run" --threads 1 >/dev/null || { echo "resume failed"; exit 1; }
cmp -s "$c/step-00000020.safetensors" "$run/checkpoints/step-00000020.safetensors" &&
  cmp -s "$c/step-00000020.optimizer.safetensors" "$run/checkpoints/step-00000020.optimizer.safetensors" ||
  { echo "the resumed run's final checkpoint differs"; exit 1; }
echo "full disk: $(cat "$work/err")"
echo "the step-5 checkpoint stayed the latest and loaded; resumed, the final checkpoint is byte-identical"

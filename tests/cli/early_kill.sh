#!/usr/bin/env bash
# early_kill.sh SEQMIX WORKDIR: a run killed inside the write of its first checkpoint (so it has none)
# resumes from step 0, removes the torn temporary file, and ends byte-identical to an uninterrupted run.
set -u
seqmix=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
args=(train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16 --mixer softmax:heads=2
      --set model=lm:dim=16 --steps 4 --eval-every 2 --threads 1)
"$seqmix" "${args[@]}" --out "$work/full" >/dev/null || { echo "uninterrupted run failed"; exit 1; }
# Write 1 is config.yaml, write 2 the step-2 tensors: killed halfway through them.
(SEQMIX_FAULT_KILL_AT_WRITE=2 exec "$seqmix" "${args[@]}" --out "$work/run" >/dev/null 2>&1) 2>/dev/null
[ $? -eq 137 ] || { echo "the write fault did not kill the run"; exit 1; }
ls -a "$work/run/checkpoints" | grep -q '\.tmp-' || { echo "the kill left no torn temporary file"; exit 1; }
"$seqmix" train --resume "$work/run" --threads 1 || { echo "resume failed"; exit 1; }
if ls -a "$work/run" "$work/run/checkpoints" | grep -q '\.tmp-'; then echo "the torn temporary file is left"; exit 1; fi
cmp -s "$work/full/checkpoints/step-00000004.safetensors" "$work/run/checkpoints/step-00000004.safetensors" ||
  { echo "final checkpoints differ"; exit 1; }
echo "resumed from step 0: final checkpoints are byte-identical"

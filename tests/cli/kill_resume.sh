#!/usr/bin/env bash
# kill_resume.sh SEQMIX WORKDIR: a run killed with SIGKILL mid-training and resumed ends with a final
# checkpoint byte-identical (model, optimizer state, RNG) to an uninterrupted run's.
set -u
seqmix=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
args=(train --task mad.in_context_recall:seq_len=16,num_train=256,num_test=16 --mixer softmax:heads=2
      --set model=lm:dim=32 --steps 300 --eval-every 50 --set train.checkpoint_every=20 --set train.target=0
      --threads 1)
"$seqmix" "${args[@]}" --out "$work/full" >/dev/null || { echo "uninterrupted run failed"; exit 1; }

"$seqmix" "${args[@]}" --out "$work/killed" >/dev/null &
pid=$!
for _ in $(seq 1 600); do  # wait until at least the step-100 checkpoint exists, then kill
  [ -f "$work/killed/checkpoints/step-00000100.json" ] && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -f "$work/killed/summary.json" ]; then echo "the run finished before it could be killed"; exit 1; fi
echo "killed after checkpoints: $(ls "$work/killed/checkpoints" | grep json | tr '\n' ' ')"
"$seqmix" train --resume "$work/killed" --threads 1 >/dev/null || { echo "resume failed"; exit 1; }
a="$work/full/checkpoints/step-00000300.safetensors"
b="$work/killed/checkpoints/step-00000300.safetensors"
if cmp -s "$a" "$b"; then echo "final checkpoints are byte-identical"; exit 0; fi
echo "final checkpoints differ"; exit 1

#!/usr/bin/env bash
# run_folder_travels.sh SEQMIX WORKDIR FIXTURE: runs that start from other runs, old run folders, and limits.
#  1. --init-from RUN (relative, recorded absolute with its step), --init-from RUN@STEP and --init-from a weights
#     file start a new run from those weights: with lr 0 its first checkpoint's weights file is byte-identical to
#     the source's. A resume that finds no checkpoint of its own loads them again, from any directory.
#  2. --init-from errors: a model the weights do not fit, no such run, no such step, with --resume; none of them
#     creates the run folder.
#  3. A run folder of checkpoint format 1 (FIXTURE, tests/data/run_format1) evaluates, seeds --init-from, and
#     resumes into format 2.
#  4. A batch or a text file beyond the machine's memory is refused before allocation, naming the option or file,
#     and creates no folder.
#  5. A 40 KB value in an error is cut to a bounded line that says how much was left out.
#  6. plot passes on what gnuplot said.
set -u
seqmix=$1
work=$2
fixture=$3
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
cd "$work"
fail() { echo "$*"; exit 1; }
args=(train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16 --mixer softmax:heads=2
      --set model=lm:dim=16 --eval-every 0 --set train.target=0 --threads 1)
"$seqmix" "${args[@]}" --steps 6 --out source >/dev/null || fail "the source run failed"
weights=source/checkpoints/step-00000006.safetensors

# 1. Three ways to name the same weights; lr 0 leaves them as they were loaded.
i=0
for from in source source@6 "$weights"; do
  i=$((i + 1))
  "$seqmix" "${args[@]}" --steps 1 --lr 0 --seed 7 --init-from "$from" --out "b$i" >"out$i" 2>&1 || fail "--init-from $from: $(cat "out$i")"
  cmp -s "$weights" "b$i/checkpoints/step-00000001.safetensors" || fail "--init-from $from: the weights differ from the source's"
done
grep -q "^init_from: $work/source@6$" b1/config.yaml || fail "config.yaml does not record the source: $(grep init_from b1/config.yaml)"
grep -q "^init     $work/source@6$" out1 || fail "the run does not say where it starts from: $(cat out1)"
grep -q "^init_from: $work/$weights$" b3/config.yaml || fail "config.yaml does not record the weights file"
# Without --init-from the seed decides: other weights.
"$seqmix" "${args[@]}" --steps 1 --lr 0 --seed 7 --out seeded >/dev/null || fail "the seeded run failed"
! cmp -s "$weights" seeded/checkpoints/step-00000001.safetensors || fail "a seeded run has the source's weights"
# A resume that finds no checkpoint of its own starts from the recorded weights again, from /.
rm -rf b1/checkpoints b1/summary.json
(cd / && "$seqmix" train --resume "$work/b1" >/dev/null) || fail "resuming b1 without a checkpoint failed"
cmp -s "$weights" b1/checkpoints/step-00000001.safetensors || fail "the resume did not start from the recorded weights"
echo "--init-from: run, run@step and weights file give the source's weights; a resume without checkpoint reloads them"

# 2. Errors, each one line, no folder.
expect() {  # expect NAME REGEX ARGS...: one line matching REGEX, a clean non-zero exit, no folder NAME
  local name=$1 regex=$2
  shift 2
  "$seqmix" "$@" >/dev/null 2>"err_$name"
  local status=$?
  [ "$status" -ne 0 ] && [ "$status" -lt 128 ] || fail "$name: exit $status"
  [ "$(grep -c . "err_$name")" -eq 1 ] || fail "$name: not one line: $(cat "err_$name")"
  grep -Eq -- "$regex" "err_$name" || fail "$name: '$(cat "err_$name")' does not match '$regex'"
  [ ! -e "$name" ] || fail "$name: the failed run left a folder"
}
expect e1 "init_from $work/source@6: checkpoint .*step-00000006.safetensors does not fit the model: tensor '.*' has shape" \
  "${args[@]}" --steps 1 --set model=lm:dim=8 --init-from source --out e1
expect e2 "init_from nowhere: no such run folder or weights file" "${args[@]}" --steps 1 --init-from nowhere --out e2
expect e3 "init_from source@99: run source has no checkpoint at step 99 \(it has 6 to 6\)" \
  "${args[@]}" --steps 1 --init-from source@99 --out e3
expect e4 "--resume continues a run as it was configured" train --resume source --init-from source
echo "--init-from errors: $(cat err_e1 | cut -c1-120)..."

# 3. Format 1.
cp -r "$fixture" old
"$seqmix" eval --run old --threads 1 >/dev/null 2>err_old || fail "eval of a format-1 run: $(cat err_old)"
"$seqmix" train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=32,vocab_size=16 --mixer softmax:heads=2 \
  --set model=lm:dim=8,layers=1 --steps 1 --lr 0 --eval-every 0 --threads 1 --init-from old --out from_old >/dev/null 2>err_old ||
  fail "--init-from a format-1 run: $(cat err_old)"
"$seqmix" train --resume old --steps 5 --threads 1 >/dev/null 2>err_old || fail "resuming a format-1 run: $(cat err_old)"
grep -q '"version": 2' old/checkpoints/step-00000005.json && [ -f old/checkpoints/step-00000005.optimizer.safetensors ] ||
  fail "the resumed format-1 run did not write format 2"
echo "a format-1 run evaluates, seeds --init-from and resumes into format 2"

# 4. Limits.
expect e5 "train.batch_size 1000000000: one step needs at least [0-9.]+ GB .*, more than this machine's [0-9.]+ GB of memory" \
  "${args[@]}" --steps 1 --batch-size 1000000000 --out e5
truncate -s 40G huge.txt  # sparse: no disk used
expect e6 "task text: the text file .*huge.txt holds 42.9 GB; the task holds it and its splits in memory" \
  train --task text:path=huge.txt --steps 1 --out e6
echo "limits: $(cat err_e5)"

# 5. A 40 KB task name.
long=$(head -c 40000 /dev/zero | tr '\0' x)
"$seqmix" train --task "$long" --steps 1 --out e7 >/dev/null 2>err_long
[ "$(grep -c . err_long)" -eq 1 ] && [ "$(wc -c < err_long)" -le 1100 ] && grep -q "bytes left out" err_long ||
  fail "a 40 KB value: $(wc -c < err_long) bytes of error"
echo "a 40 KB value: $(wc -c < err_long) bytes: $(cut -c1-60 err_long)..."

# 6. gnuplot cannot write a folder.
mkdir -p a_folder.png
"$seqmix" plot source --out a_folder.png >/dev/null 2>err_plot && fail "plot into a folder succeeded"
[ "$(grep -c . err_plot)" -eq 1 ] && grep -q "plot: gnuplot failed writing a_folder.png: .*cannot open file; output not changed; system error: Is a directory" err_plot ||
  fail "plot: $(cat err_plot)"
echo "plot: $(cat err_plot)"

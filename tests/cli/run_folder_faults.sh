#!/usr/bin/env bash
# run_folder_faults.sh SEQMIX WORKDIR: the faults of a run folder besides kills and a full disk for checkpoints.
#  1. The disk fills up while metrics.jsonl is appended (SEQMIX_FAULT_LOG_BYTES): the run stops with one line
#     naming the file and a clean non-zero exit; the log keeps its whole lines and no torn one; once there is room
#     again the resumed run ends byte-identical to an uninterrupted one.
#  2. A second writer (train --resume or --out on the folder of a live run) gets one line naming the folder and
#     the live process's pid, and touches nothing.
#  3. SIGINT (SIGTERM) stops a run after its step with a checkpoint of that step (exit 130 (143), one line, no
#     summary.json), and --resume continues from it.
#  4. The files of a run follow the umask (0644 under 022).
#  5. --resume DIR --steps N extends a finished run.
#  6. A text run trained on a relative path generates and evaluates from another working directory.
set -u
seqmix=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
umask 022
args=(train --task mad.in_context_recall:seq_len=16,num_train=256,num_test=16 --mixer softmax:heads=2
      --set model=lm:dim=32 --eval-every 0 --set train.target=0 --set train.log_every=10 --threads 1)
"$seqmix" "${args[@]}" --steps 60 --set train.checkpoint_every=20 --out "$work/full" >/dev/null ||
  { echo "uninterrupted run failed"; exit 1; }
for f in config.yaml summary.json metrics.jsonl checkpoints/step-00000060.json checkpoints/step-00000060.safetensors; do
  [ "$(stat -c %a "$work/full/$f")" = 644 ] || { echo "$f has mode $(stat -c %a "$work/full/$f"), not 644"; exit 1; }
done

# 1. A full disk under the log: room for its first 3 lines and half the 4th.
lines=$(head -3 "$work/full/metrics.jsonl" | wc -c)
room=$(( lines + $(sed -n 4p "$work/full/metrics.jsonl" | wc -c) / 2 ))
run=$work/log_full
SEQMIX_FAULT_LOG_BYTES=$room "$seqmix" "${args[@]}" --steps 60 --set train.checkpoint_every=20 --out "$run" \
  >/dev/null 2>"$work/err"
status=$?
[ "$status" -ne 0 ] && [ "$status" -lt 128 ] || { echo "log full: expected a clean non-zero exit, got $status"; exit 1; }
[ "$(grep -c . "$work/err")" -eq 1 ] || { echo "log full: expected one line on stderr:"; cat "$work/err"; exit 1; }
grep -q "cannot write .*metrics.jsonl: No space left on device; the run stops here" "$work/err" ||
  { echo "log full: unexpected message: $(cat "$work/err")"; exit 1; }
# Line lengths vary with the logged speeds, so the room ends somewhere in line 4 or 5: whole lines only, in order.
python3 -c "
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith('\\n'), 'the log ends in a torn line'
steps = [json.loads(l)['step'] for l in text.splitlines()]
assert steps == [10, 20, 30] or steps == [10, 20, 30, 40], steps" "$run/metrics.jsonl" ||
  { echo "log full: the log is not its first whole lines"; exit 1; }
"$seqmix" train --resume "$run" --threads 1 >/dev/null || { echo "log full: resume failed"; exit 1; }
cmp -s "$work/full/checkpoints/step-00000060.safetensors" "$run/checkpoints/step-00000060.safetensors" ||
  { echo "log full: the resumed run's final checkpoint differs"; exit 1; }
echo "log full: $(cat "$work/err")"
# 5. --resume --steps extends the finished run: 60 more steps, config.yaml says 120, the summary 120.
"$seqmix" train --resume "$run" --steps 120 --threads 1 >"$work/out_extend" 2>&1 ||
  { echo "extend: $(cat "$work/out_extend")"; exit 1; }
grep -q "after 120 steps" "$work/out_extend" && grep -q "steps: 120" "$run/config.yaml" &&
  [ -f "$run/checkpoints/step-00000120.json" ] || { echo "extend: not at step 120: $(cat "$work/out_extend")"; exit 1; }
echo "extended from 60 to 120 steps"

# 2 and 3. A long run; a second writer while it runs; then SIGINT.
run=$work/interrupted
"$seqmix" "${args[@]}" --steps 100000 --set train.checkpoint_every=1000000 --out "$run" >/dev/null 2>"$work/err_int" &
pid=$!
for _ in $(seq 600); do [ -s "$run/metrics.jsonl" ] && break; sleep 0.1; done
[ -s "$run/metrics.jsonl" ] || { kill -9 $pid; echo "the long run logged nothing"; exit 1; }
for second in "--resume $run" "--out $run"; do
  # shellcheck disable=SC2086
  "$seqmix" train $second --threads 1 >/dev/null 2>"$work/err2"
  status=$?
  [ "$status" -ne 0 ] && [ "$status" -lt 128 ] || { kill -9 $pid; echo "second writer: exit $status"; exit 1; }
  grep -q "run folder $run is in use by another seqmix process (pid $pid)" "$work/err2" && [ "$(grep -c . "$work/err2")" -eq 1 ] ||
    { kill -9 $pid; echo "second writer ($second): $(cat "$work/err2")"; exit 1; }
done
kill -0 $pid 2>/dev/null || { echo "the first run did not survive the second writer"; exit 1; }
kill -INT $pid
wait $pid
status=$?
[ "$status" -eq 130 ] || { echo "SIGINT: exit $status, not 130: $(cat "$work/err_int")"; exit 1; }
grep -q "train: stopped by SIGINT after step [0-9]*; its checkpoint is written: continue with seqmix train --resume $run" \
  "$work/err_int" || { echo "SIGINT: unexpected message: $(cat "$work/err_int")"; exit 1; }
step=$(sed -n 's/.*after step \([0-9]*\);.*/\1/p' "$work/err_int")
[ -f "$run/checkpoints/$(printf 'step-%08d.json' "$step")" ] || { echo "SIGINT: no checkpoint of step $step"; exit 1; }
[ ! -e "$run/summary.json" ] || { echo "SIGINT: an interrupted run wrote summary.json"; exit 1; }
# The resumed run continues from that checkpoint and stops the same way on SIGTERM.
"$seqmix" train --resume "$run" --threads 1 >/dev/null 2>"$work/err_term" &
resumed=$!
for _ in $(seq 600); do [ "$(wc -l < "$run/metrics.jsonl")" -gt $(( step / 10 )) ] && break; sleep 0.1; done
kill -TERM $resumed
wait $resumed
status=$?
[ "$status" -eq 143 ] || { echo "SIGTERM of the resumed run: exit $status, not 143: $(cat "$work/err_term")"; exit 1; }
later=$(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\);.*/\1/p' "$work/err_term")
[ -n "$later" ] && [ "$later" -gt "$step" ] || { echo "SIGTERM: $(cat "$work/err_term")"; exit 1; }
echo "second writers refused; SIGINT at step $step and, resumed, SIGTERM at step $later wrote their checkpoints"

# 6. A relative text path, then generate and eval from elsewhere.
mkdir -p "$work/text"
for i in $(seq 300); do echo "Romeo $((i % 7)): the night is come, and day is $((i % 5)) hours away."; done > "$work/text/tiny.txt"
(cd "$work/text" && "$seqmix" train --task text:path=tiny.txt,seq_len=16,vocab_size=300 --mixer softmax:heads=2 \
   --set model=lm:dim=16 --steps 2 --eval-every 0 --threads 1 --out "$work/text_run" >/dev/null) ||
  { echo "text run failed"; exit 1; }
grep -q "path=$work/text/tiny.txt" "$work/text_run/config.yaml" || { echo "config.yaml keeps a relative text path"; exit 1; }
(cd / && "$seqmix" generate --run "$work/text_run" --prompt "Romeo" --tokens 4 --threads 1 >/dev/null &&
   "$seqmix" eval --run "$work/text_run" --threads 1 >/dev/null) || { echo "generate or eval from / failed"; exit 1; }
echo "a text run on a relative path generates and evaluates from /"


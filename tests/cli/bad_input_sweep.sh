#!/usr/bin/env bash
# bad_input_sweep.sh SEQMIX WORKDIR [text]: every kind of bad input the command line meets, enumerated:
# malformed, mistyped or unknown config keys and overrides, bad spec strings, missing, empty, truncated
# or garbage data files, damaged checkpoints and run directories, bad command arguments. Each must exit
# non-zero (not from a signal: no abort, no segfault) with exactly one line on stderr that names the
# problem. Prints one row per case and fails listing the cases that did not. "text" runs the cases that
# need the tokenizer instead (a sanitizer build has none).
set -u
seqmix=$1
work=$2
group=${3:-core}
rm -rf "$work"
mkdir -p "$work"
failed=() count=0

# expect NAME REGEX ARGS...: the case NAME runs seqmix ARGS and must fail cleanly with a line matching REGEX.
expect() {
  local name=$1 regex=$2
  shift 2
  count=$((count + 1))
  local err code lines
  err=$("$seqmix" "$@" 2>&1 >/dev/null)
  code=$?
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [ "$code" -eq 0 ] || [ "$code" -ge 128 ] || [ "$lines" -ne 1 ] || ! printf '%s\n' "$err" | grep -Eq -- "$regex"; then
    failed+=("$name")
    printf 'FAIL %-28s exit %3d, %d lines: %s\n' "$name" "$code" "$lines" "$(printf '%s' "$err" | head -c 600)"
  else
    printf 'ok   %-28s exit %3d: %s\n' "$name" "$code" "$err"
  fi
}

tiny_task=mad.in_context_recall:seq_len=16,num_train=32,num_test=8
train=(train --task "$tiny_task" --steps 2 --eval-every 2 --batch-size 4 --threads 1 --mixer softmax:heads=2)
W=$work

if [ "$group" = core ]; then
  # Configs: unreadable, not YAML, wrong types and shapes, unknown keys.
  expect config_missing "$W/absent.yaml" train --config "$W/absent.yaml" --out "$W/r"
  printf 'train: [unclosed\n' >"$W/not_yaml.yaml"
  expect config_not_yaml "not_yaml.yaml" train --config "$W/not_yaml.yaml" --out "$W/r"
  printf 'train:\n  lr: fast\n' >"$W/wrong_type.yaml"
  expect config_wrong_type "train.lr" train --config "$W/wrong_type.yaml" --out "$W/r"
  printf 'train:\n  steps: 2.5\n' >"$W/fraction.yaml"
  expect config_fraction_for_integer "train.steps" train --config "$W/fraction.yaml" --out "$W/r"
  printf 'train:\n  steps: [1, 2]\n' >"$W/list.yaml"
  expect config_list_for_number "train.steps" train --config "$W/list.yaml" --out "$W/r"
  printf 'seed:\n  a: 1\n' >"$W/map.yaml"
  expect config_map_for_number "seed" train --config "$W/map.yaml" --out "$W/r"
  printf 'train:\n  lrr: 1\n' >"$W/unknown.yaml"
  expect config_unknown_key "train.lrr" train --config "$W/unknown.yaml" --out "$W/r"
  printf -- '- a\n- b\n' >"$W/top_list.yaml"
  expect config_top_level_list "top_list.yaml" train --config "$W/top_list.yaml" --out "$W/r"
  printf 'train:\n  beta1: 2\n' >"$W/range.yaml"
  expect config_out_of_range "train.beta1" train --config "$W/range.yaml" --out "$W/r"
  # Fixed bytes, not random ones: '%' and garbage once read as a YAML directive and an empty config (a default run).
  printf '%%\315\213Fk\237\200\0\377' >"$W/binary.yaml"
  expect config_binary_garbage "binary.yaml is not a text file" train --config "$W/binary.yaml" --out "$W/r"
  printf 'seed: 1\n\377\376\n' >"$W/latin1.yaml"
  expect config_not_utf8 "latin1.yaml is not UTF-8 text" train --config "$W/latin1.yaml" --out "$W/r"
  expect override_without_value "train.lr" "${train[@]}" --set train.lr --out "$W/r"
  expect override_unknown_key "nope" "${train[@]}" --set nope=1 --out "$W/r"
  expect override_wrong_type "train.batch_size" "${train[@]}" --set train.batch_size=four --out "$W/r"
  expect flag_out_of_range "warmup|train.warmup" "${train[@]}" --warmup -1 --out "$W/r"

  # Spec strings.
  expect mixer_unknown "unknown mixer 'nope'" train --mixer nope --out "$W/r"
  expect mixer_unknown_option "has no option 'hedas'" train --mixer softmax:hedas=2 --out "$W/r"
  expect mixer_out_of_range "heads" train --mixer softmax:heads=0 --out "$W/r"
  expect mixer_option_without_value "heads" train --mixer softmax:heads --out "$W/r"
  expect mixer_empty "mixer" train --mixer "" --out "$W/r"
  expect task_unknown "unknown task" train --task nothing --out "$W/r"
  expect task_out_of_range "seq_len" train --task mad.in_context_recall:seq_len=-4 --out "$W/r"
  expect model_unknown "unknown model" train --model nope --out "$W/r"
  expect channel_mixer_unknown "channel" train --model lm:channel=nope --out "$W/r"

  # ETT-style CSV files: missing, empty, header only, truncated mid-row, not numbers, a folder, garbage.
  ett() { echo "ett:path=$1,input_len=2,horizon=1,train_rows=6,val_rows=4,test_rows=4"; }
  expect csv_missing "absent.csv" train --task "$(ett "$W/absent.csv")" --out "$W/r"
  : >"$W/empty.csv"
  expect csv_empty "empty.csv" train --task "$(ett "$W/empty.csv")" --out "$W/r"
  printf 'date,a,b\n' >"$W/header.csv"
  expect csv_header_only "header.csv" train --task "$(ett "$W/header.csv")" --out "$W/r"
  { printf 'date,a,b\n'; for i in $(seq 1 20); do printf '2016-07-01 %02d:00:00,%d.5,%d\n' "$i" "$i" "$i"; done; printf '2016-07-02 00:00:00,3'; } >"$W/truncated.csv"
  expect csv_truncated "truncated.csv" train --task "$(ett "$W/truncated.csv")" --out "$W/r"
  { printf 'date,a,b\n'; for i in $(seq 1 20); do printf 'x,%d,seven\n' "$i"; done; } >"$W/words.csv"
  expect csv_not_numbers "words.csv" train --task "$(ett "$W/words.csv")" --out "$W/r"
  expect csv_is_a_folder "$W" train --task "$(ett "$W")" --out "$W/r"
  head -c 4096 /dev/urandom >"$W/garbage.csv"
  expect csv_garbage "garbage.csv" train --task "$(ett "$W/garbage.csv")" --out "$W/r"
  { printf 'date,a,b\n'; for i in $(seq 1 6); do printf 'x,%d,%d\n' "$i" "$i"; done; } >"$W/short.csv"
  expect csv_too_few_rows "short.csv|rows" train --task "$(ett "$W/short.csv")" --out "$W/r"

  # Run directories and checkpoints: a good run, then damaged copies of it.
  "$seqmix" "${train[@]}" --out "$W/run" --quiet >/dev/null 2>&1 || "$seqmix" "${train[@]}" --out "$W/run" >/dev/null
  damaged() {  # damaged NAME: a fresh copy of the good run
    rm -rf "$W/$1"
    cp -r "$W/run" "$W/$1"
    echo "$W/$1"
  }
  record() { ls "$1"/checkpoints/*.json | tail -1; }
  tensors() { ls "$1"/checkpoints/*.safetensors | tail -1; }
  d=$(damaged truncated_record); r=$(record "$d"); head -c 40 "$r" >"$r.cut" && mv "$r.cut" "$r"
  expect checkpoint_truncated_record "not valid JSON" eval --run "$d"
  d=$(damaged truncated_tensors); t=$(tensors "$d"); head -c 100 "$t" >"$t.cut" && mv "$t.cut" "$t"
  expect checkpoint_truncated_tensors "truncated or corrupt" eval --run "$d"
  d=$(damaged flipped_byte); t=$(tensors "$d"); printf '\x7f' | dd of="$t" bs=1 seek=200 conv=notrunc 2>/dev/null
  expect checkpoint_flipped_byte "truncated or corrupt" eval --run "$d"
  d=$(damaged missing_tensors); rm "$(tensors "$d")"
  expect checkpoint_missing_tensors "is missing" eval --run "$d"
  d=$(damaged wrong_field); r=$(record "$d"); sed -i 's/"step": [0-9]*/"step": "two"/' "$r"
  expect checkpoint_wrong_field_type "wrong type" eval --run "$d"
  d=$(damaged bad_config); printf 'mixer: [softmax\n' >"$d/config.yaml"
  expect run_config_corrupt "config.yaml" eval --run "$d"
  d=$(damaged other_model); sed -i 's/lm:dim=128/lm:dim=64/' "$d/config.yaml"
  expect run_config_changed "does not fit the model" eval --run "$d"
  expect resume_not_a_run "no config.yaml" train --resume "$W/absent_run"
  expect eval_no_run "$W/absent_run" eval --run "$W/absent_run"
  expect eval_missing_step "no checkpoint at step 999" eval --run "$W/run" --step 999
  d=$(damaged corrupt_metrics); { printf 'garbage\n'; cat "$W/run/metrics.jsonl"; } >"$d/metrics.jsonl"
  expect plot_corrupt_metrics "metrics.jsonl line 1 is not a JSON object" plot "$d" --out "$W/p.png"

  # Command arguments.
  expect unknown_command "" frobnicate
  expect unknown_flag "frobnicate" train --frobnicate
  expect bench_bad_shape "shape" bench --op attention --shape 0,4
  expect bench_unknown_op "unknown op|op 'nope'" bench --op nope --shape 1,4,1,2,2
  expect bench_unknown_impl "impl" bench --op attention --shape 1,4,1,2,2 --impl turbo
  expect mad_unknown_task "unknown task|nope" mad --task nope --mixer softmax --out "$W/m"
  expect generate_not_text "generate needs a run of the text task" generate --run "$W/run"

  # Inputs that never end, and files beyond the input limit: every file seqmix reads is a regular file it holds
  # whole, up to SEQMIX_MAX_INPUT_BYTES (default: the machine's memory); none leaves a run folder.
  expect csv_endless "cannot read /dev/zero: it is a character device" train --task "ett:path=/dev/zero" --out "$W/r"
  expect config_endless "cannot read /dev/zero: it is a character device" train --config /dev/zero --out "$W/r"
  expect weights_endless "/dev/zero: it is a character device" eval --run "$W/run" --weights /dev/zero
  mkfifo "$W/pipe.yaml"
  expect config_pipe "pipe.yaml: it is a pipe" train --config "$W/pipe.yaml" --out "$W/r"
  printf 'seed: 1\n' >"$W/small.yaml"
  SEQMIX_MAX_INPUT_BYTES=3 expect config_beyond_limit "small.yaml: it holds 8 bytes, more than the 3 bytes SEQMIX_MAX_INPUT_BYTES allows" \
    train --config "$W/small.yaml" --out "$W/r"
  SEQMIX_MAX_INPUT_BYTES=lots expect input_limit_malformed "SEQMIX_MAX_INPUT_BYTES must be a positive number" \
    train --config "$W/small.yaml" --out "$W/r"
  if [ -e "$W/r" ]; then failed+=("input_cases_left_a_run_folder"); echo "FAIL a refused input left $W/r"; fi

  # Numbers that are not numbers, and names that do not exist.
  expect temperature_nan "--temperature must be a finite number" generate --run "$W/run" --temperature nan
  expect plot_unknown_metric "have no metric 'nope'; they have: .*accuracy" plot "$W/run" --metric nope --out "$W/p.png"
  mkdir -p "$W/no_evaluations"
  printf '{"step":1,"split":"train","loss":1.0}\n' >"$W/no_evaluations/metrics.jsonl"
  expect plot_no_evaluations "no_evaluations has no evaluations yet" plot "$W/no_evaluations" --out "$W/p.png"
  if [ -e "$W/p.png" ]; then failed+=("plot_wrote_a_picture"); echo "FAIL a refused plot wrote $W/p.png"; fi

  # Data-parallel arguments (docs/distributed.md).
  expect nproc_zero "nproc" "${train[@]}" --nproc 0 --out "$W/r"
  expect nproc_uneven_batch "batch size 4 does not split evenly over 3 processes" "${train[@]}" --nproc 3 --out "$W/r"
  expect nproc_with_dist_init "--nproc starts its own workers" "${train[@]}" --nproc 2 --dist-init "file://$W/s" --out "$W/r"
  expect rank_without_dist_init "--rank and --world-size belong to --dist-init" "${train[@]}" --rank 1 --out "$W/r"
  expect dist_init_unknown "unknown init method 'tcp://x'" "${train[@]}" --dist-init tcp://x --out "$W/r"
  expect dist_rank_under_env "--rank and --world-size belong to --dist-init file://" "${train[@]}" --dist-init env:// --rank 0 --out "$W/r"
  expect dist_init_no_world_size "WORLD_SIZE is not set" "${train[@]}" --dist-init "file://$W/s" --rank 0 --out "$W/r"
  expect dist_rank_out_of_range "rank 2 must be in 0..1" "${train[@]}" --dist-init "file://$W/s" --rank 2 --world-size 2 --out "$W/r"
  export WORLD_SIZE=2 RANK=one  # as a broken launcher would set them
  expect dist_env_not_integer "RANK='one' is not an integer" "${train[@]}" --out "$W/r"
  unset WORLD_SIZE RANK
  expect dist_join_timeout "could not join the job of 2 at file://$W/s2: .*after 1 s" "${train[@]}" --dist-init "file://$W/s2" --rank 0 --world-size 2 --dist-timeout 1 --out "$W/r"
  expect dist_backend_unknown "unknown backend 'mpi' \\(valid: gloo, nccl\\)" "${train[@]}" --dist-init "file://$W/s3" --rank 0 --world-size 1 --dist-backend mpi --out "$W/r"
  expect dist_backend_without_job "--dist-backend belongs to a data-parallel job" "${train[@]}" --dist-backend nccl --out "$W/r"
  # The NCCL plugin loads and asks for a GPU: none on this project's machines (docs/distributed.md). The store
  # file the join made is removed again.
  expect dist_backend_nccl_needs_a_gpu "rank 0: the nccl backend needs a CUDA device and this machine has none" "${train[@]}" --dist-init "file://$W/s4" --rank 0 --world-size 1 --dist-backend nccl --out "$W/r"
  if [ -e "$W/s4" ]; then failed+=("dist_backend_nccl_store_left_behind"); echo "FAIL the store file $W/s4 was left behind"; fi
  expect bench_op_without_torch_kernel "gla has no impl 'torch'" bench --op gla --shape 1,4,1,2,2 --impl torch
  expect eval_weights_missing "absent.safetensors" eval --run "$W/run" --weights "$W/absent.safetensors"
  expect bench_nproc_without_model "give --model SPEC" bench --op attention --shape 1,4,1,2,2 --nproc 2
  expect bench_nproc_twice "lists 2 twice" bench --model gla --shape 1,4,8 --nproc 2,2
else
  # Text files and tokenizers.
  text_task() { echo "text:path=$1,seq_len=8,vocab_size=300"; }
  expect text_missing "absent.txt" train --task "$(text_task "$W/absent.txt")" --out "$W/r"
  : >"$W/empty.txt"
  expect text_empty "empty.txt|empty" train --task "$(text_task "$W/empty.txt")" --out "$W/r"
  printf 'ab' >"$W/tiny.txt"
  expect text_too_short "yields at most [0-9]+ BPE pieces, fewer than vocab_size=300; set vocab_size to" train --task "$(text_task "$W/tiny.txt")" --out "$W/r"
  expect text_is_a_folder "cannot read the text file $W" train --task "$(text_task "$W")" --out "$W/r"
  expect text_endless "cannot read the text file /dev/zero: it is a character device" \
    train --task "$(text_task /dev/zero)" --out "$W/r"
  head -c 5000 /dev/zero >"$W/nul.txt"
  expect text_of_nul_bytes "nul.txt cannot make a BPE vocabulary: this text [(]5000 bytes, one byte value, 0x00, repeated[)]" \
    train --task "$(text_task "$W/nul.txt")" --out "$W/r"
  if [ -e "$W/r" ]; then failed+=("text_cases_left_a_run_folder"); echo "FAIL a refused text left $W/r"; fi
  expect text_vocab_out_of_range "vocab_size" train --task "text:path=$W/tiny.txt,vocab_size=1" --out "$W/r"
fi

echo "$count cases, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]

# Command-line tests: bad input gives one clear line and a non-zero exit; good input works.
set(SEQMIX_EXPECT_ERROR ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_error.sh)

function(seqmix_cli_error name regex)
  add_test(NAME cli.${name} COMMAND ${SEQMIX_EXPECT_ERROR} "${regex}" $<TARGET_FILE:seqmix> ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES LABELS fast TIMEOUT 120)
endfunction()

seqmix_cli_error(threads_beyond_hardware "threads=1024 is more than 8 times this machine.s" train --threads 1024 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(learning_rate_beyond_float "key 'train.lr' must be >= 0 and <= 3.4e\\+38, got 1e39" train --lr 1e39 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
# Devices: an unknown name, or a GPU this machine does not have (here none; on a GPU machine no 999th), is one line
# and no CPU run.
seqmix_cli_error(train_unknown_device "device: unknown device 'tpu'; valid devices: cpu, cuda, cuda:N" train --device tpu --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(train_missing_gpu "device cuda:999: (no GPU is visible to this process|there is no GPU 999|this seqmix was built without CUDA support)" train --device cuda:999 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bench_missing_gpu "--device cuda:999: (no GPU is visible to this process|there is no GPU 999|this seqmix was built without CUDA support)" bench --device cuda:999)
seqmix_cli_error(mad_unknown_device "--device: unknown device 'gpu'; valid devices: cpu, cuda, cuda:N" mad --mixer softmax --task in_context_recall --max-steps 1 --device gpu --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/mad_device)
seqmix_cli_error(unknown_mixer "unknown mixer 'nope'; valid mixers: softmax" train --mixer nope --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(unknown_mixer_key "mixer softmax has no option 'hedas'" train --mixer softmax:hedas=2 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bad_option_value "option 'heads' expects an integer" train --mixer softmax:heads=many --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(indivisible_heads "not divisible by heads=5" train --mixer softmax:heads=5 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(unknown_task "unknown task 'mad.nothing'" train --task mad.nothing --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bad_task_option "must be even" train --task mad.in_context_recall:seq_len=63 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(unknown_model_key "model lm has no option 'width'" train --model lm:width=4 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bad_steps "steps" train --steps 0)
seqmix_cli_error(unknown_command "" frobnicate)
seqmix_cli_error(hyper_bad_label "mixer hypermlp: variant 'R-cx': unknown part 'cx'" train --mixer hypermlp:variant=R-cx --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(hyper_budget "cannot match softmax attention.s 65,536 parameters at width 128 and max_len 63 with mix_rank=16.*use mix_rank=" train --mixer hyperglu:mix_rank=16 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)

add_test(NAME cli.list_shows_every_mixer COMMAND $<TARGET_FILE:seqmix> list)
set_tests_properties(cli.list_shows_every_mixer PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "softmax  -.*relu  -.*linear  -.*gla  -.*ssm  -.*mad.in_context_recall")
add_test(NAME cli.list_ops_prints_the_op_table COMMAND $<TARGET_FILE:seqmix> list --ops)
set_tests_properties(cli.list_ops_prints_the_op_table PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "attention\n  op    attention  \\[fused, naive, torch\\].*gla\n.*  bench lrnn_decay")
# One torch: the program runs on the venv's LibTorch (the version and library CMake found), and names its BLAS.
add_test(NAME cli.info_reports_torch_and_blas COMMAND $<TARGET_FILE:seqmix> info)
set_tests_properties(cli.info_reports_torch_and_blas PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "torch +${SEQMIX_TORCH_VERSION} \\(${TORCH_INSTALL_PREFIX}/lib/libtorch_cpu\\.so\\).*BLAS +Intel MKL [0-9].*GFLOP/s")

# Configs and overrides.
set(SEQMIX_CLI_TMP ${CMAKE_CURRENT_BINARY_DIR}/cli_tmp)
file(MAKE_DIRECTORY ${SEQMIX_CLI_TMP})
file(WRITE ${SEQMIX_CLI_TMP}/bad_key.yaml "train:\n  lrr: 0.1\n")
file(WRITE ${SEQMIX_CLI_TMP}/bad_type.yaml "train:\n  steps: lots\n")
file(WRITE ${SEQMIX_CLI_TMP}/bad_yaml.yaml "task: [unclosed\n")
file(WRITE ${SEQMIX_CLI_TMP}/split_spec.yaml "mixer: [fem:prior=gla,heads=4]\n")
seqmix_cli_error(config_unknown_key "unknown key 'train.lrr'; valid keys: task" train --config ${SEQMIX_CLI_TMP}/bad_key.yaml --out ${SEQMIX_CLI_TMP}/x1)
seqmix_cli_error(config_wrong_type "'train.steps' expects an integer" train --config ${SEQMIX_CLI_TMP}/bad_type.yaml --out ${SEQMIX_CLI_TMP}/x2)
seqmix_cli_error(config_malformed "is not valid YAML" train --config ${SEQMIX_CLI_TMP}/bad_yaml.yaml --out ${SEQMIX_CLI_TMP}/x3)
seqmix_cli_error(config_split_spec "item 'heads=4' of 'mixer' looks like an option of 'fem:prior=gla' that YAML split off at a comma; quote a spec with options: \\[\"fem:prior=gla,heads=4\"\\]" train --config ${SEQMIX_CLI_TMP}/split_spec.yaml --out ${SEQMIX_CLI_TMP}/x7)
seqmix_cli_error(config_missing "cannot read" train --config ${SEQMIX_CLI_TMP}/absent.yaml --out ${SEQMIX_CLI_TMP}/x4)
seqmix_cli_error(set_unknown_key "--set: unknown key 'train.lrr'" train --set train.lrr=1 --out ${SEQMIX_CLI_TMP}/x5)
seqmix_cli_error(resume_without_run "has no config.yaml to resume from" train --resume ${SEQMIX_CLI_TMP}/no_such_run)
seqmix_cli_error(eval_without_run "has no config.yaml" eval --run ${SEQMIX_CLI_TMP}/no_such_run)
seqmix_cli_error(mad_unknown_preset "unknown MAD preset 'gpu'" mad --mixer softmax --preset gpu --out ${SEQMIX_CLI_TMP}/mad)
seqmix_cli_error(mad_unknown_task "unknown MAD task 'mad.copy'" mad --mixer softmax --task mad.copy --out ${SEQMIX_CLI_TMP}/mad)
seqmix_cli_error(plot_missing_run "metrics.jsonl does not exist" plot ${SEQMIX_CLI_TMP}/no_such_run --out ${SEQMIX_CLI_TMP}/p.png)

# Benchmarks: bad input, then a tiny run whose JSON lines carry every field.
seqmix_cli_error(bench_unknown_op "unknown op 'nope'; valid ops: attention, fem_softmax_read, linear_attention, gla" bench --op nope --shape 1,8,2,4,4)
seqmix_cli_error(bench_malformed_shape "--shape expects 5 positive integers B,T,H,dk,dv for --op, got '1,8,2'" bench --op gla --shape 1,8,2)
seqmix_cli_error(bench_unknown_impl "unknown impl 'fast'; valid impls: auto, fused, naive, torch, chunked" bench --op gla --shape 1,8,2,4,4 --impl fast)
seqmix_cli_error(bench_unknown_mixer "unknown mixer 'nope'; valid mixers: softmax" bench --model nope --shape 1,8,16)
seqmix_cli_error(bench_conflicting_impl "--impl naive conflicts with impl=fused" bench --model gla:impl=fused --impl naive --shape 1,8,16)
seqmix_cli_error(bench_op_and_model "exactly one of --op NAME, --model SPEC and --config FILE" bench --op gla --model gla --shape 1,8,16)
add_test(NAME cli.bench_tiny_json COMMAND $<TARGET_FILE:seqmix> bench --op gla --shape 1,8,2,4,4 --backward --json
         --repeats 2 --warmup 1 --threads 1)
set_tests_properties(cli.bench_tiny_json PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION
  "{\"op\":\"gla\",\"impl\":\"fused\",\"dtype\":\"fp32\",\"shape\":\\[1,8,2,4,4\\],\"fwd_ms\":[0-9.e-]+,\"fwdbwd_ms\":[0-9.e-]+,\"tokens_per_s\":[0-9]+,\"fwdbwd_tokens_per_s\":[0-9]+,\"peak_mb\":[0-9.]+,\"ref_gflops\":[0-9.]+,\"gflops\":[0-9.e-]+,\"fwdbwd_gflops\":[0-9.e-]+}\n{\"op\":\"gla\",\"impl\":\"naive\",")
add_test(NAME cli.bench_tiny_model COMMAND $<TARGET_FILE:seqmix> bench --model gla:heads=2 --shape 1,8,16 --backward
         --repeats 2 --warmup 1 --threads 1)
set_tests_properties(cli.bench_tiny_model PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "gla:heads=2.*1,8,16.*reference matmul: [0-9.]+ GFLOP/s")

# --dtype bf16: every case also in bfloat16, next to its fp32 row, with the ratio measured in the run.
add_test(NAME cli.bench_tiny_bf16_op COMMAND $<TARGET_FILE:seqmix> bench --op attention --impl fused --shape 1,8,2,4,4
         --backward --dtype bf16 --repeats 2 --warmup 1 --threads 1)
set_tests_properties(cli.bench_tiny_bf16_op PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION
  "attention +fused +fp32 +1,8,2,4,4[^\n]*\nattention +fused +bf16 +1,8,2,4,4.*attention \\(fused\\) bf16 is [0-9.]+x (faster|slower) than fp32 \\(fwd\\)\n.*\\(fwd\\+bwd\\)")
add_test(NAME cli.bench_tiny_bf16_model COMMAND $<TARGET_FILE:seqmix> bench --model fem:prior=gla,heads=2 --shape 1,8,16
         --backward --dtype bf16 --json --repeats 2 --warmup 1 --threads 1)
set_tests_properties(cli.bench_tiny_bf16_model PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION
  "\"impl\":\"fused\",\"dtype\":\"fp32\".*\n.*\"impl\":\"fused\",\"dtype\":\"bf16\".*\n.*\"impl\":\"naive\",\"dtype\":\"fp32\".*\n.*\"impl\":\"naive\",\"dtype\":\"bf16\"")
# A mixer whose impl option offers naive only (the delta rule) is timed with it, not refused.
add_test(NAME cli.bench_naive_only_mixer COMMAND $<TARGET_FILE:seqmix> bench --model delta:heads=2 --shape 1,8,16
         --repeats 1 --warmup 0 --threads 1)
set_tests_properties(cli.bench_naive_only_mixer PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "delta:heads=2,impl=naive +naive +fp32 +1,8,16")
seqmix_cli_error(train_unknown_dtype "key 'train.dtype' must be one of fp32, bf16, got 'fp16'" train --dtype fp16 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bench_unknown_dtype "--dtype: unknown dtype .fp8. .valid: fp32, bf16." bench --op gla --shape 1,8,2,4,4 --dtype fp8)

add_test(NAME cli.bench_tiny_hyperglu COMMAND $<TARGET_FILE:seqmix> bench --model hyperglu:variant=G-cg-12o! --shape 1,12,16
         --backward --repeats 2 --warmup 1 --threads 1)
set_tests_properties(cli.bench_tiny_hyperglu PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "hyperglu:variant=G-cg-12o!.*1,12,16.*reference matmul: [0-9.]+ GFLOP/s")
add_test(NAME cli.tiny_hyperglu_run_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_CLI_TMP}/tiny_hyperglu_run)
set_tests_properties(cli.tiny_hyperglu_run_clean PROPERTIES FIXTURES_SETUP tiny_hyperglu_clean LABELS fast)
add_test(NAME cli.tiny_hyperglu_run COMMAND $<TARGET_FILE:seqmix> train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16
         --mixer hyperglu:variant=G-cg-12o! --set model=lm:dim=16 --steps 4 --eval-every 2 --threads 1
         --out ${SEQMIX_CLI_TMP}/tiny_hyperglu_run)
set_tests_properties(cli.tiny_hyperglu_run PROPERTIES FIXTURES_REQUIRED tiny_hyperglu_clean LABELS fast
  PASS_REGULAR_EXPRESSION "accuracy")

# The energy-attention mixers and the NagMHA residual (a nested spec in parentheses), then a resume that
# rebuilds the model from the resolved config.
set(SEQMIX_ENERGY_RUN ${SEQMIX_CLI_TMP}/tiny_energy_run)
add_test(NAME cli.tiny_energy_run_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_ENERGY_RUN})
set_tests_properties(cli.tiny_energy_run_clean PROPERTIES FIXTURES_SETUP tiny_energy_clean LABELS fast)
add_test(NAME cli.tiny_energy_run COMMAND $<TARGET_FILE:seqmix> train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16
         --mixer mha2nd1st:heads=2 --mixer light2nd1st:heads=2 --mixer energy:heads=2
         --set "model=lm:dim=16,layers=3,residual=(nesterov:share=layer,norm=post)" --steps 4 --eval-every 2 --threads 1
         --out ${SEQMIX_ENERGY_RUN})
set_tests_properties(cli.tiny_energy_run PROPERTIES FIXTURES_REQUIRED tiny_energy_clean FIXTURES_SETUP tiny_energy_run
  LABELS fast PASS_REGULAR_EXPRESSION "final accuracy")
add_test(NAME cli.tiny_energy_run_config COMMAND ${CMAKE_COMMAND} -E cat ${SEQMIX_ENERGY_RUN}/config.yaml)
set_tests_properties(cli.tiny_energy_run_config PROPERTIES FIXTURES_REQUIRED tiny_energy_run LABELS fast
  PASS_REGULAR_EXPRESSION "residual=\\(nesterov:share=layer,norm=post\\)")
add_test(NAME cli.tiny_energy_run_resume COMMAND $<TARGET_FILE:seqmix> train --resume ${SEQMIX_ENERGY_RUN} --threads 1)
set_tests_properties(cli.tiny_energy_run_resume PROPERTIES FIXTURES_REQUIRED tiny_energy_run LABELS fast
  PASS_REGULAR_EXPRESSION "final accuracy")

# A tiny run in bf16 (autocast): trains, records train.dtype, evaluates and resumes in it.
set(SEQMIX_BF16_RUN ${SEQMIX_CLI_TMP}/tiny_bf16_run)
add_test(NAME cli.tiny_bf16_run_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_BF16_RUN})
set_tests_properties(cli.tiny_bf16_run_clean PROPERTIES FIXTURES_SETUP tiny_bf16_clean LABELS fast)
add_test(NAME cli.tiny_bf16_run COMMAND $<TARGET_FILE:seqmix> train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16
         --mixer fem:prior=gla,heads=2 --mixer delta:heads=2 --set model=lm:dim=16 --steps 4 --eval-every 2 --threads 1
         --dtype bf16 --out ${SEQMIX_BF16_RUN})
set_tests_properties(cli.tiny_bf16_run PROPERTIES FIXTURES_REQUIRED tiny_bf16_clean FIXTURES_SETUP tiny_bf16_run
  LABELS fast PASS_REGULAR_EXPRESSION "final accuracy")
add_test(NAME cli.tiny_bf16_run_config COMMAND ${CMAKE_COMMAND} -E cat ${SEQMIX_BF16_RUN}/config.yaml)
set_tests_properties(cli.tiny_bf16_run_config PROPERTIES FIXTURES_REQUIRED tiny_bf16_run LABELS fast
  PASS_REGULAR_EXPRESSION "dtype: bf16")
add_test(NAME cli.tiny_bf16_run_eval COMMAND $<TARGET_FILE:seqmix> eval --run ${SEQMIX_BF16_RUN})
set_tests_properties(cli.tiny_bf16_run_eval PROPERTIES FIXTURES_REQUIRED tiny_bf16_run LABELS fast
  PASS_REGULAR_EXPRESSION "accuracy")
add_test(NAME cli.tiny_bf16_run_resume COMMAND $<TARGET_FILE:seqmix> train --resume ${SEQMIX_BF16_RUN} --steps 6 --threads 1)
set_tests_properties(cli.tiny_bf16_run_resume PROPERTIES FIXTURES_REQUIRED tiny_bf16_run DEPENDS cli.tiny_bf16_run_eval LABELS fast
  PASS_REGULAR_EXPRESSION "final accuracy [0-9.]+ \\(best [0-9.]+ at step [0-9]+\\) after 6 steps")

# A tiny run, then what can be done with it.
set(SEQMIX_TINY_RUN ${SEQMIX_CLI_TMP}/tiny_run)
add_test(NAME cli.tiny_run_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_TINY_RUN})
add_test(NAME cli.tiny_run COMMAND $<TARGET_FILE:seqmix> train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16
         --mixer softmax:heads=2 --mixer gla:heads=2 --set model=lm:dim=16 --steps 6 --eval-every 3 --threads 1 --out ${SEQMIX_TINY_RUN})
add_test(NAME cli.tiny_run_files COMMAND ${CMAKE_COMMAND} -E cat ${SEQMIX_TINY_RUN}/config.yaml ${SEQMIX_TINY_RUN}/summary.json
         ${SEQMIX_TINY_RUN}/checkpoints/step-00000006.json)
add_test(NAME cli.tiny_run_eval COMMAND $<TARGET_FILE:seqmix> eval --run ${SEQMIX_TINY_RUN} --json)
add_test(NAME cli.tiny_run_plot COMMAND $<TARGET_FILE:seqmix> plot ${SEQMIX_TINY_RUN} --out ${SEQMIX_CLI_TMP}/tiny.png)
add_test(NAME cli.tiny_run_resume_finished COMMAND $<TARGET_FILE:seqmix> train --resume ${SEQMIX_TINY_RUN} --threads 1)
add_test(NAME cli.tiny_run_refuses_overwrite COMMAND ${SEQMIX_EXPECT_ERROR} "already holds a run; continue it with --resume"
         $<TARGET_FILE:seqmix> train --steps 2 --out ${SEQMIX_TINY_RUN})
add_test(NAME cli.tiny_run_resume_rejects_changes COMMAND ${SEQMIX_EXPECT_ERROR} "only --threads, --device and"
         $<TARGET_FILE:seqmix> train --resume ${SEQMIX_TINY_RUN} --batch-size 9)
add_test(NAME cli.tiny_run_resume_cannot_shorten COMMAND ${SEQMIX_EXPECT_ERROR} "is already at step 6; give more steps"
         $<TARGET_FILE:seqmix> train --resume ${SEQMIX_TINY_RUN} --steps 6)
set_tests_properties(cli.tiny_run_clean PROPERTIES FIXTURES_SETUP tiny_clean LABELS fast)
set_tests_properties(cli.tiny_run PROPERTIES FIXTURES_REQUIRED tiny_clean FIXTURES_SETUP tiny_run LABELS fast
  PASS_REGULAR_EXPRESSION "final accuracy [0-9.]+ \\(best")
set_tests_properties(cli.tiny_run_files PROPERTIES FIXTURES_REQUIRED tiny_run LABELS fast
  PASS_REGULAR_EXPRESSION "mixer:.*- softmax:heads=2.*- gla:heads=2.*\"best\".*\"final\".*\"parameters\".*\"rng\"")
set_tests_properties(cli.tiny_run_eval PROPERTIES FIXTURES_REQUIRED tiny_run LABELS fast
  PASS_REGULAR_EXPRESSION "\"accuracy\":[0-9.]+.*\"step\":6")
set_tests_properties(cli.tiny_run_plot PROPERTIES FIXTURES_REQUIRED tiny_run LABELS fast PASS_REGULAR_EXPRESSION "wrote .*tiny.png")
set_tests_properties(cli.tiny_run_resume_finished cli.tiny_run_refuses_overwrite cli.tiny_run_resume_rejects_changes
  cli.tiny_run_resume_cannot_shorten PROPERTIES FIXTURES_REQUIRED tiny_run LABELS fast)
set_tests_properties(cli.tiny_run_resume_finished PROPERTIES PASS_REGULAR_EXPRESSION "after 6 steps")

# SIGKILL in the middle of training, then --resume, twenty times (half of them inside a file write, by
# fault injection): the same final weights, bit for bit; and a disk that fills up during a checkpoint write.
# docs/reliability.md.
add_test(NAME cli.twenty_kills_and_resumes_are_bit_exact
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/kill_many.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/kill_many 20)
set_tests_properties(cli.twenty_kills_and_resumes_are_bit_exact PROPERTIES LABELS fast TIMEOUT 600
  PASS_REGULAR_EXPRESSION "20 kills \\(10 inside a write.*byte-identical")
add_test(NAME cli.run_folder_faults
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_folder_faults.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/run_folder_faults)
set_tests_properties(cli.run_folder_faults PROPERTIES LABELS fast TIMEOUT 300)
add_test(NAME cli.run_folder_travels
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_folder_travels.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/run_folder_travels
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/run_format1)
set_tests_properties(cli.run_folder_travels PROPERTIES LABELS fast TIMEOUT 300)

# --seeds: one run per seed and the table; --match-params: the value it solves (parameter counts are exact).
set(SEQMIX_TINY_RECALL mad.in_context_recall:seq_len=16,num_train=64,num_test=16)
add_test(NAME cli.seeds_tabulate
         COMMAND sh -c "rm -rf \"$1\" && \"$0\" train --task ${SEQMIX_TINY_RECALL} --mixer softmax:heads=2 --model lm:dim=16 --steps 4 --eval-every 2 --threads 1 --seeds 0,1,2 --out \"$1\" && \"$0\" train --task ${SEQMIX_TINY_RECALL} --mixer softmax:heads=2 --model lm:dim=16 --steps 4 --eval-every 2 --threads 1 --seeds 0,1,2 --out \"$1\" && cat \"$1/seeds.json\""
                 $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/seeds)
set_tests_properties(cli.seeds_tabulate PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "seed 2: finished earlier.*accuracy +[0-9.]+ ± [0-9.]+.*\"std\": {")
# scripts/seeds_table.py (docs/results.md's three-seed tables) on two tiny --seeds tables: rows, means and the
# baseline column against the records, and its errors; then three_seeds.sh's lm_table part on the same two
# tables standing in for MHA's and FEM-GLA's (its row names, MHA as the baseline).
add_test(NAME cli.seeds_table_matches_records
         COMMAND sh -c "rm -rf \"$1\" && for m in softmax gla; do \"$0\" train --task ${SEQMIX_TINY_RECALL} --mixer $m:heads=2 --model lm:dim=16 --steps 4 --eval-every 2 --threads 1 --seeds 0,1,2 --out \"$1/$m\" >/dev/null || exit 1; done && \"$2\" \"$3\" \"$4\" \"$1/softmax\" \"$1/gla\" && mkdir \"$1/out\" && ln -s ../softmax \"$1/out/lm_mha\" && ln -s ../gla \"$1/out/lm_fem_gla\" && SEQMIX=\"$0\" \"$5\" \"$1/out\" 1 lm_table > \"$1/lm_table.md\" && grep -q '^| MHA (softmax attention, RoPE) | 7,392 | .* | (baseline) |$' \"$1/lm_table.md\" && grep -Eq '^\\| FEM-GLA \\(`fem:prior=gla`\\), matched \\| 7,460 \\| .* \\| (below|above|overlap) \\|$' \"$1/lm_table.md\" && echo lm_table: both rows named, MHA the baseline && \"$6\" \"$1/softmax\" \"$1/kept/softmax\" >/dev/null && test -f \"$1/kept/softmax/seeds.yaml\" && test -z \"$(find \"$1/kept\" -name checkpoints)\" && test \"$(\"$2\" \"$4\" \"$1/softmax=A\")\" = \"$(\"$2\" \"$4\" \"$1/kept/softmax=A\")\" && echo kept records: the same table"
                 $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/seeds_table ${SEQMIX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/seeds_table_check.py
                 ${PROJECT_SOURCE_DIR}/scripts/seeds_table.py ${PROJECT_SOURCE_DIR}/scripts/three_seeds.sh
                 ${PROJECT_SOURCE_DIR}/scripts/keep_run_records.sh)
set_tests_properties(cli.seeds_table_matches_records PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "seeds_table_check: the table of .* matches their records \\(accuracy, 2 evaluations\\).*lm_table: both rows named, MHA the baseline.*kept records: the same table")
add_test(NAME cli.match_params_solves_an_option
         COMMAND sh -c "rm -rf \"$1\" && \"$0\" train --task ${SEQMIX_TINY_RECALL} --mixer gla --match-params fem:prior=softmax --match-option mixer.heads --steps 1 --eval-every 0 --threads 1 --out \"$1\" && grep -q gla:heads=32 \"$1/config.yaml\""
                 $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/match_params)
set_tests_properties(cli.match_params_solves_an_option PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "matched  mixer.heads=32 gives 415,440 parameters, the reference fem:prior=softmax 414,648 \\(\\+0.19%\\)")
seqmix_cli_error(match_params_out_of_reach "cannot match within 0.5%: model.dim=127 gives 411,445 parameters, the reference softmax 407,184 \\(\\+1.05%\\); choose another --match-option"
                 train --task ${SEQMIX_TINY_RECALL} --mixer fem:prior=softmax --match-params softmax --steps 1 --out ${SEQMIX_CLI_TMP}/match_x1)
seqmix_cli_error(match_option_malformed "--match-option dim: name model.<key> or mixer.<key>"
                 train --task ${SEQMIX_TINY_RECALL} --match-params softmax --match-option dim --steps 1 --out ${SEQMIX_CLI_TMP}/match_x2)
seqmix_cli_error(eval_task_option_malformed "--task-option 'heldout' must be KEY=VALUE" eval --run ${SEQMIX_TINY_RUN} --task-option heldout)
set_tests_properties(cli.eval_task_option_malformed PROPERTIES FIXTURES_REQUIRED tiny_run)

# The README's main job (its first command's `./build/seqmix train`) reaches what the README says: the 0.99 target.
add_test(NAME readme.main_job
         COMMAND sh -c "rm -rf \"$1\" && \"$0\" train --out \"$1\"" $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/readme_main_job)
set_tests_properties(readme.main_job PROPERTIES LABELS slow TIMEOUT 3600
                     PASS_REGULAR_EXPRESSION "final accuracy (0\\.99[0-9][0-9]|1\\.0000) \\(best")
# ... and so does the same job in bf16 (forward passes under bfloat16 autocast).
add_test(NAME readme.main_job_bf16
         COMMAND sh -c "rm -rf \"$1\" && \"$0\" train --dtype bf16 --out \"$1\"" $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/readme_main_job_bf16)
set_tests_properties(readme.main_job_bf16 PROPERTIES LABELS slow TIMEOUT 3600
                     PASS_REGULAR_EXPRESSION "final accuracy (0\\.99[0-9][0-9]|1\\.0000) \\(best")
# The libFuzzer targets build (clang, fuzz/; scripts/fuzz.sh installs it) and each runs 30 s from its corpus, clean.
add_test(NAME fuzz.every_target_builds_and_runs COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh 30)
set_tests_properties(fuzz.every_target_builds_and_runs PROPERTIES LABELS slow TIMEOUT 3600
  PASS_REGULAR_EXPRESSION "fuzz_tokenizer +[0-9]+ executions in +[0-9]+ s  clean" FAIL_REGULAR_EXPRESSION "FOUND A FAILURE")
add_test(NAME cli.full_disk_keeps_the_last_checkpoint
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/full_disk.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/full_disk)
set_tests_properties(cli.full_disk_keeps_the_last_checkpoint PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "byte-identical")
# A run killed before its first checkpoint resumes from step 0 (the same run: seed and step decide it).
add_test(NAME cli.resume_before_first_checkpoint
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/early_kill.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/early_kill)
set_tests_properties(cli.resume_before_first_checkpoint PROPERTIES LABELS fast TIMEOUT 120
  PASS_REGULAR_EXPRESSION "has no checkpoint yet: starting again from step 0.*final checkpoints are byte-identical")

# Numerical faults: lr=1e30 sends the weights to ~1e30 in one step, so step 2's output overflows. By
# default that stops the run naming the step and the first non-finite tensor; --skip-nonfinite skips and
# counts the steps (all five that follow, as the weights never change again).
set(SEQMIX_NONFINITE_RUN "train --task mad.in_context_recall:seq_len=16,num_train=32,num_test=8 --mixer softmax:heads=2 \
--steps 6 --eval-every 3 --batch-size 4 --threads 1 --lr 1e30")
add_test(NAME cli.nonfinite_step_stops_the_run COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/nonfinite && exec ${SEQMIX_EXPECT_ERROR} 'train: step 2: the model output is not finite \\(--skip-nonfinite skips such steps\\)' $<TARGET_FILE:seqmix> ${SEQMIX_NONFINITE_RUN} --out ${SEQMIX_CLI_TMP}/nonfinite")
set_tests_properties(cli.nonfinite_step_stops_the_run PROPERTIES LABELS fast TIMEOUT 120)
add_test(NAME cli.skip_nonfinite_counts_skipped_steps COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/skip_nonfinite && exec $<TARGET_FILE:seqmix> ${SEQMIX_NONFINITE_RUN} --skip-nonfinite --out ${SEQMIX_CLI_TMP}/skip_nonfinite")
set_tests_properties(cli.skip_nonfinite_counts_skipped_steps PROPERTIES LABELS fast TIMEOUT 120
  PASS_REGULAR_EXPRESSION "train: step 2: the model output is not finite: skipped \\(1 so far\\).*skipped 5 steps whose loss or gradient was not finite")

# Bad input of every kind the command line meets, enumerated (docs/reliability.md): one line, non-zero
# exit, never a crash. The text cases need the tokenizer, which a sanitizer build lacks.
add_test(NAME cli.bad_input_sweep
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/bad_input_sweep.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/sweep core)
set_tests_properties(cli.bad_input_sweep PROPERTIES LABELS fast TIMEOUT 300 PASS_REGULAR_EXPRESSION "[0-9]+ cases, 0 failed")
# Every numeric config key and command flag fed NaN, inf, -inf, 0 and a huge value (the spec options of every
# component: tests/io/numeric_options_test.cpp). Its base run is a text task, so it needs the tokenizer.
add_test(NAME cli.numeric_options_sweep
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/numeric_options_sweep.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/numeric_sweep)
set_tests_properties(cli.numeric_options_sweep PROPERTIES LABELS "fast;tokenizer" TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "[0-9]+ options, [0-9]+ cases, 0 failed")
add_test(NAME cli.bad_input_sweep_text
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/bad_input_sweep.sh $<TARGET_FILE:seqmix> ${SEQMIX_CLI_TMP}/sweep_text text)
set_tests_properties(cli.bad_input_sweep_text PROPERTIES LABELS "fast;tokenizer" TIMEOUT 300
  PASS_REGULAR_EXPRESSION "[0-9]+ cases, 0 failed")

# ELA-GPT in miniature: ELA mixers, Hyper-Link with a causal Memory Lobe and label-biased MoE channel
# mixers; the load-balance loss is logged next to the task loss, and an unknown ELA kernel is a clear error.
set(SEQMIX_ELA_RUN ${SEQMIX_CLI_TMP}/tiny_ela_run)
add_test(NAME cli.tiny_ela_run_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_ELA_RUN})
set_tests_properties(cli.tiny_ela_run_clean PROPERTIES FIXTURES_SETUP tiny_ela_clean LABELS fast)
add_test(NAME cli.tiny_ela_run COMMAND $<TARGET_FILE:seqmix> train --task mad.in_context_recall:seq_len=16,num_train=64,num_test=16
         --mixer ela:heads=2 --mixer ela:heads=2,kernel=direction_magnitude
         --set "model=lm:dim=16,layers=2,channel=(moe:experts=3,label=inner),residual=(hyperlink:lobe=causal),final_norm=0"
         --steps 4 --eval-every 2 --threads 1 --out ${SEQMIX_ELA_RUN})
set_tests_properties(cli.tiny_ela_run PROPERTIES FIXTURES_REQUIRED tiny_ela_clean FIXTURES_SETUP tiny_ela_run
  LABELS fast PASS_REGULAR_EXPRESSION "final accuracy")
add_test(NAME cli.tiny_ela_run_logs_aux_loss COMMAND ${CMAKE_COMMAND} -E cat ${SEQMIX_ELA_RUN}/metrics.jsonl)
set_tests_properties(cli.tiny_ela_run_logs_aux_loss PROPERTIES FIXTURES_REQUIRED tiny_ela_run LABELS fast
  PASS_REGULAR_EXPRESSION "\"aux_loss\":[0-9]")
seqmix_cli_error(unknown_ela_kernel "unknown ELA kernel 'cosine'; valid kernels: direction_magnitude, hadamard_exp"
                 train --mixer ela:kernel=cosine --steps 1)

# Text: a tiny language model trained on a generated text, then sampled with `generate`.
string(REPEAT "Romeo: the night is come, and Juliet is the sun.\nJuliet: O Romeo, wherefore art thou Romeo?\n" 40
       SEQMIX_TINY_TEXT)
file(WRITE ${SEQMIX_CLI_TMP}/tiny.txt "${SEQMIX_TINY_TEXT}")
set(SEQMIX_TINY_TEXT_RUN ${SEQMIX_CLI_TMP}/tiny_text_run)
add_test(NAME cli.tiny_text_run_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_TINY_TEXT_RUN})
add_test(NAME cli.tiny_text_run COMMAND $<TARGET_FILE:seqmix> train --task text:path=${SEQMIX_CLI_TMP}/tiny.txt,seq_len=16,vocab_size=300
         --mixer softmax:heads=2 --model lm:dim=16,layers=1 --steps 4 --eval-every 2 --threads 1 --out ${SEQMIX_TINY_TEXT_RUN})
add_test(NAME cli.tiny_text_run_tokenizer COMMAND ${CMAKE_COMMAND} -E md5sum ${SEQMIX_TINY_TEXT_RUN}/tokenizer.model)
add_test(NAME cli.tiny_text_generate COMMAND $<TARGET_FILE:seqmix> generate --run ${SEQMIX_TINY_TEXT_RUN} --prompt "Romeo:"
         --tokens 12 --temperature 0.8 --top-k 20 --samples 2 --threads 1)
add_test(NAME cli.tiny_text_generate_bad_temperature COMMAND ${SEQMIX_EXPECT_ERROR} "--temperature must be a finite number >= 0 [(]0 = greedy[)], got -1$"
         $<TARGET_FILE:seqmix> generate --run ${SEQMIX_TINY_TEXT_RUN} --temperature -1)
add_test(NAME cli.generate_needs_a_text_run COMMAND ${SEQMIX_EXPECT_ERROR} "generate needs a run of the text task"
         $<TARGET_FILE:seqmix> generate --run ${SEQMIX_TINY_RUN})
set_tests_properties(cli.tiny_text_run_clean PROPERTIES FIXTURES_SETUP tiny_text_clean LABELS "fast;tokenizer")
set_tests_properties(cli.tiny_text_run PROPERTIES FIXTURES_REQUIRED tiny_text_clean FIXTURES_SETUP tiny_text_run LABELS "fast;tokenizer"
  PASS_REGULAR_EXPRESSION "final loss [0-9.]+ \\(best")
set_tests_properties(cli.tiny_text_run_tokenizer PROPERTIES FIXTURES_REQUIRED tiny_text_run LABELS "fast;tokenizer")
set_tests_properties(cli.tiny_text_generate PROPERTIES FIXTURES_REQUIRED tiny_text_run LABELS "fast;tokenizer"
  PASS_REGULAR_EXPRESSION "--- sample 1 \\(checkpoint step 4\\)\nRomeo:.*--- sample 2")
set_tests_properties(cli.tiny_text_generate_bad_temperature PROPERTIES FIXTURES_REQUIRED tiny_text_run LABELS "fast;tokenizer")
set_tests_properties(cli.generate_needs_a_text_run PROPERTIES FIXTURES_REQUIRED tiny_run LABELS fast)
# eval and generate read the run's saved tokenizer.model (not a BPE trained again): a damaged one is named.
add_test(NAME cli.tiny_text_reads_saved_tokenizer COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/tiny_text_copy && cp -r ${SEQMIX_TINY_TEXT_RUN} ${SEQMIX_CLI_TMP}/tiny_text_copy && echo damaged > ${SEQMIX_CLI_TMP}/tiny_text_copy/tokenizer.model && exec ${SEQMIX_EXPECT_ERROR} 'tiny_text_copy/tokenizer.model is not a SentencePiece model' $<TARGET_FILE:seqmix> generate --run ${SEQMIX_CLI_TMP}/tiny_text_copy --tokens 2")
set_tests_properties(cli.tiny_text_reads_saved_tokenizer PROPERTIES FIXTURES_REQUIRED tiny_text_run LABELS "fast;tokenizer")
# train --resume reads it too: the damaged copy is named before any training.
add_test(NAME cli.tiny_text_resume_reads_saved_tokenizer COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/tiny_text_resume && cp -r ${SEQMIX_TINY_TEXT_RUN} ${SEQMIX_CLI_TMP}/tiny_text_resume && echo damaged > ${SEQMIX_CLI_TMP}/tiny_text_resume/tokenizer.model && exec ${SEQMIX_EXPECT_ERROR} 'tiny_text_resume/tokenizer.model is not a SentencePiece model' $<TARGET_FILE:seqmix> train --resume ${SEQMIX_CLI_TMP}/tiny_text_resume --threads 1")
set_tests_properties(cli.tiny_text_resume_reads_saved_tokenizer PROPERTIES FIXTURES_REQUIRED tiny_text_run LABELS "fast;tokenizer")
seqmix_cli_error(text_missing_file "cannot read the text file ${SEQMIX_CLI_TMP}/absent.txt"
                 train --task text:path=${SEQMIX_CLI_TMP}/absent.txt --steps 1 --out ${SEQMIX_CLI_TMP}/x6)
seqmix_cli_error(generate_without_run "has no config.yaml" generate --run ${SEQMIX_CLI_TMP}/no_such_run)

# Forecasting on a tiny synthetic table in ETT's layout (tests/data/ett_tiny.csv): DLinear and the
# forecaster train a few steps and report MSE; eval rebuilds a DLinear run (its mixer is none); a
# missing file and a mixer given to DLinear are one-line errors.
set(SEQMIX_ETT_TINY "ett:path=${CMAKE_CURRENT_SOURCE_DIR}/data/ett_tiny.csv,input_len=24,horizon=12,train_rows=200,val_rows=50,test_rows=50")
set(SEQMIX_ETT_DLINEAR_RUN ${SEQMIX_CLI_TMP}/ett_dlinear_run)
set(SEQMIX_ETT_FORECASTER_RUN ${SEQMIX_CLI_TMP}/ett_forecaster_run)
add_test(NAME cli.ett_runs_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${SEQMIX_ETT_DLINEAR_RUN} ${SEQMIX_ETT_FORECASTER_RUN})
set_tests_properties(cli.ett_runs_clean PROPERTIES FIXTURES_SETUP ett_clean LABELS fast)
add_test(NAME cli.ett_dlinear_run COMMAND $<TARGET_FILE:seqmix> train --task ${SEQMIX_ETT_TINY} --model dlinear
         --steps 6 --eval-every 3 --threads 1 --out ${SEQMIX_ETT_DLINEAR_RUN})
set_tests_properties(cli.ett_dlinear_run PROPERTIES FIXTURES_REQUIRED ett_clean FIXTURES_SETUP ett_dlinear_run LABELS fast
  PASS_REGULAR_EXPRESSION "model    dlinear:kernel=25: 600 parameters.*final mse [0-9.]+ \\(best")
add_test(NAME cli.ett_dlinear_run_summary COMMAND ${CMAKE_COMMAND} -E cat ${SEQMIX_ETT_DLINEAR_RUN}/summary.json
         ${SEQMIX_ETT_DLINEAR_RUN}/config.yaml)
set_tests_properties(cli.ett_dlinear_run_summary PROPERTIES FIXTURES_REQUIRED ett_dlinear_run LABELS fast
  PASS_REGULAR_EXPRESSION "\"final\": {[^}]*\"mae\": [0-9.e-]+,[^}]*\"mse\": [0-9.e-]+.*\"mixer\": \"none\".*mixer:[ \n-]+none")
add_test(NAME cli.ett_dlinear_run_eval COMMAND $<TARGET_FILE:seqmix> eval --run ${SEQMIX_ETT_DLINEAR_RUN} --json --threads 1)
set_tests_properties(cli.ett_dlinear_run_eval PROPERTIES FIXTURES_REQUIRED ett_dlinear_run LABELS fast
  PASS_REGULAR_EXPRESSION "\"mse\":[0-9.e-]+.*\"step\":6")
add_test(NAME cli.ett_forecaster_run COMMAND $<TARGET_FILE:seqmix> train --task ${SEQMIX_ETT_TINY}
         --mixer fem:prior=gla,heads=2 --set model=forecaster:dim=16 --steps 4 --eval-every 2 --threads 1
         --out ${SEQMIX_ETT_FORECASTER_RUN})
set_tests_properties(cli.ett_forecaster_run PROPERTIES FIXTURES_REQUIRED ett_clean FIXTURES_SETUP ett_forecaster_run
  LABELS fast PASS_REGULAR_EXPRESSION "final mse [0-9.]+ \\(best")
add_test(NAME cli.ett_forecaster_run_summary COMMAND ${CMAKE_COMMAND} -E cat ${SEQMIX_ETT_FORECASTER_RUN}/summary.json)
set_tests_properties(cli.ett_forecaster_run_summary PROPERTIES FIXTURES_REQUIRED ett_forecaster_run LABELS fast
  PASS_REGULAR_EXPRESSION "\"final\": {[^}]*\"mse\": [0-9.e-]+")
seqmix_cli_error(ett_missing_csv "task ett: the data file .*/absent\\.csv does not exist; give its path as a task option"
                 train --task ett:path=${SEQMIX_CLI_TMP}/absent.csv --steps 1 --out ${SEQMIX_CLI_TMP}/ett_x1)
seqmix_cli_error(ett_dlinear_rejects_mixer "model dlinear takes no sequence mixer; leave out --mixer \\(got softmax\\)"
                 train --task ${SEQMIX_ETT_TINY} --model dlinear --mixer softmax --steps 1 --out ${SEQMIX_CLI_TMP}/ett_x2)
seqmix_cli_error(ett_lm_model "model lm emits one output per input position; a forecasting task needs model forecaster or dlinear"
                 train --task ${SEQMIX_ETT_TINY} --model lm --steps 1 --out ${SEQMIX_CLI_TMP}/ett_x3)
include(${CMAKE_CURRENT_SOURCE_DIR}/cli/results_smoke.cmake)

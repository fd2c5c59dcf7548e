# Smoke versions of the commands in docs/results.md, a few steps each, so that none of them rots:
# - every config under configs/ trains 2 steps of batch 2 (text and ett configs on embedded tiny data, so
#   CI needs no data files; their model, mixer and training keys are the config's own, and a text config
#   keeps its seq_len, which sizes mixers such as HyperGLU);
# - seqmix bench --config times the LM configs' models at a tiny shape;
# - scripts/mad_table.sh (seqmix mad) runs its table with every run capped at one step.
# Needs SEQMIX_CLI_TMP, SEQMIX_ETT_TINY and tiny.txt from cli_tests.cmake.
set(SEQMIX_SMOKE_CONFIG ${CMAKE_CURRENT_SOURCE_DIR}/cli/smoke_config.sh)
string(REPEAT "Romeo: the night is come, and Juliet is the sun.\nJuliet: O Romeo, wherefore art thou Romeo?\n" 400
       SEQMIX_SMOKE_TEXT)
file(WRITE ${SEQMIX_CLI_TMP}/smoke.txt "${SEQMIX_SMOKE_TEXT}")
file(GLOB_RECURSE SEQMIX_RESULT_CONFIGS CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/configs/*.yaml)
list(SORT SEQMIX_RESULT_CONFIGS)
foreach(config ${SEQMIX_RESULT_CONFIGS})
  file(READ ${PROJECT_SOURCE_DIR}/${config} content)
  string(REGEX REPLACE "^configs/(.*)\\.yaml$" "\\1" name ${config})
  string(REPLACE "/" "." name ${name})
  set(task_override)
  set(labels fast)
  if(content MATCHES "\ntask: (text[^\n]*)")
    set(labels "fast;tokenizer")  # a sanitizer build, which has no tokenizer, leaves these out
    string(REGEX REPLACE "vocab_size=[0-9]+" "vocab_size=300" text_task "${CMAKE_MATCH_1}")
    set(task_override --set task=${text_task},path=${SEQMIX_CLI_TMP}/smoke.txt)
  elseif(content MATCHES "\ntask: ett")
    set(task_override --set task=${SEQMIX_ETT_TINY})
  elseif(content MATCHES "\ntask: argmax")
    set(task_override --set task=argmax:seq_len=16,dim=32)
  else()
    message(FATAL_ERROR "${config}: no smoke rule for its task line; add one in ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  # Re-read the config when it changes (its task line picks the override).
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${config})
  add_test(NAME results.config.${name}
           COMMAND ${SEQMIX_SMOKE_CONFIG} $<TARGET_FILE:seqmix> ${PROJECT_SOURCE_DIR}/${config}
                   ${SEQMIX_CLI_TMP}/results/${name} ${task_override} --steps 2 --set train.batch_size=2
                   --set train.eval_every=2 --set train.warmup=0 --threads 1)
  set_tests_properties(results.config.${name} PROPERTIES LABELS "${labels}" TIMEOUT 300
    PASS_REGULAR_EXPRESSION "final [a-z_]+ [0-9.]+ \\(best [0-9.]+ at step 2\\) after 2 steps")
endforeach()

file(GLOB SEQMIX_LM_CONFIGS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/configs/lm/*.yaml)
list(SORT SEQMIX_LM_CONFIGS)
string(REPLACE ";" "," SEQMIX_LM_CONFIG_LIST "${SEQMIX_LM_CONFIGS}")
add_test(NAME results.bench_lm_configs COMMAND $<TARGET_FILE:seqmix> bench --config ${SEQMIX_LM_CONFIG_LIST}
         --shape 1,16 --backward --repeats 1 --warmup 0 --threads 1)
set_tests_properties(results.bench_lm_configs PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "ela_gpt.yaml +- +fp32 +1,16 .*nagmha.yaml +- +fp32 +1,16 .*ela_gpt.yaml is [0-9.]+x (faster|slower) than .*nagmha.yaml \\(fwd\\+bwd\\)")
seqmix_cli_error(bench_config_not_text "etth1_softmax.yaml: bench --config times language models of the text task, not task 'ett'"
                 bench --config ${PROJECT_SOURCE_DIR}/configs/ett/etth1_softmax.yaml --shape 1,16)
seqmix_cli_error(bench_config_shape "--shape expects 2 positive integers B,T for --config, got '1,16,4'"
                 bench --config ${PROJECT_SOURCE_DIR}/configs/lm/mha.yaml --shape 1,16,4)
seqmix_cli_error(bench_config_too_long "--shape T=512 is longer than the config's seq_len 256, which sizes its model"
                 bench --config ${PROJECT_SOURCE_DIR}/configs/lm/hyperglu.yaml --shape 1,512)
seqmix_cli_error(bench_config_impl "--impl does not apply to --config"
                 bench --config ${PROJECT_SOURCE_DIR}/configs/lm/mha.yaml --impl fused --shape 1,16)

# The MAD table script with every row, each run capped at one step of one task (80 s here: the slow label; in the
# fast suite results.mad_table_matches_results_md runs the same script over the kept records, every row).
add_test(NAME results.mad_table_capped COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/results/mad && SEQMIX=$<TARGET_FILE:seqmix> exec ${PROJECT_SOURCE_DIR}/scripts/mad_table.sh ${SEQMIX_CLI_TMP}/results/mad --preset cpu --task mad.in_context_recall --max-steps 1 --threads 1 --quiet")
set_tests_properties(results.mad_table_capped PROPERTIES LABELS slow TIMEOUT 600
  PASS_REGULAR_EXPRESSION "\\| `fem:prior=softmax,flags=` \\| [0-9.]+ \\| [0-9.]+ \\|.*`ela:kernel=sum_sq_euclidean` \\| [0-9.]+.*capped at --max-steps 1: a smoke test.*`softmax with residual=momentum`.*`softmax with residual=nesterov`")
add_test(NAME results.mad_capped_residual COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/results/mad_residual && exec $<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --mixer softmax --residual nesterov --max-steps 1 --threads 1 --quiet --out ${SEQMIX_CLI_TMP}/results/mad_residual")
set_tests_properties(results.mad_capped_residual PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "\\| `softmax with residual=nesterov` \\| [0-9.]+ \\| [0-9.]+ \\|")
# --seeds: each seed's runs (12345's are the ones --seed 12345 trains, the others in their own folders), then
# mean ± sample std per cell; the seed-1 runs are found again by a single-seed table.
add_test(NAME results.mad_seeds_capped COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/mad_seeds && rm -rf $d && $<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --mixer softmax --max-steps 1 --seeds 12345,1 --threads 1 --quiet --out $d && $<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --mixer softmax --max-steps 1 --seed 1 --finished-only --out $d")
set_tests_properties(results.mad_seeds_capped PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "\\| `softmax` \\| [0-9.]+ ± [0-9.]+ \\| [0-9.]+ ± [0-9.]+ \\|.*\\| `softmax` \\| [0-9.]+ \\| [0-9.]+ \\|.*finished runs only")
seqmix_cli_error(mad_seeds_twice "mad: --seeds lists a seed twice"
                 mad --preset cpu --task mad.compression --mixer softmax --seeds 1,1 --max-steps 1 --quiet
                 --out ${SEQMIX_CLI_TMP}/results/mad_seeds_twice)
seqmix_cli_error(mad_unknown_residual "unknown residual scheme 'bogus'; valid residual schemes: prenorm"
                 mad --preset cpu --task mad.compression --mixer softmax --residual bogus --max-steps 1 --quiet
                 --out ${SEQMIX_CLI_TMP}/results/mad_bogus)

# results.md quotes the MAD table that its kept records (docs/runs/mad-cpu) give: the table is rebuilt from a
# copy of them without training, and every row must match results.md's, cell for cell.
add_test(NAME results.mad_table_matches_results_md COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/mad_kept && rm -rf $d && cp -r ${PROJECT_SOURCE_DIR}/docs/runs/mad-cpu $d && SEQMIX=$<TARGET_FILE:seqmix> ${PROJECT_SOURCE_DIR}/scripts/mad_table.sh $d --preset cpu --finished-only >/dev/null && exec ${SEQMIX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/mad_table_in_results.py ${PROJECT_SOURCE_DIR}/docs/results.md $d")
set_tests_properties(results.mad_table_matches_results_md PROPERTIES LABELS fast TIMEOUT 120
  PASS_REGULAR_EXPRESSION "all 19 rows of results.md's MAD table match the kept records")

# results.md's three-seed MAD table is the one its kept records give: the records of seeds 1 and 2 (and of the
# matched FEM row) in docs/runs/three_seeds/mad, seed 12345's from docs/runs/mad-cpu, tabulated without training.
add_test(NAME results.mad_three_seeds_matches_results_md COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/mad_three_seeds && rm -rf $d && mkdir -p $d && cp -r ${PROJECT_SOURCE_DIR}/docs/runs/three_seeds/mad $d/mad && SEQMIX=$<TARGET_FILE:seqmix> ${PROJECT_SOURCE_DIR}/scripts/three_seeds.sh $d 1 mad_table >/dev/null && test -z \"$(find $d -name checkpoints)\" && exec ${SEQMIX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/mad_table_in_results.py ${PROJECT_SOURCE_DIR}/docs/results.md $d/mad '| row (seeds 12345, 1, 2) | mixer spec |'")
set_tests_properties(results.mad_three_seeds_matches_results_md PROPERTIES LABELS fast TIMEOUT 120
  PASS_REGULAR_EXPRESSION "all 7 rows of results.md's MAD table match the kept records")

# results.md's Tiny Shakespeare table over three seeds is three_seeds.sh's lm_table on the kept records (all 11
# models, every row verbatim and in order).
add_test(NAME results.lm_three_seeds_matches_results_md COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/lm_three_seeds && rm -rf $d && mkdir -p $d && ${PROJECT_SOURCE_DIR}/scripts/three_seeds.sh ${PROJECT_SOURCE_DIR}/docs/runs/three_seeds 1 lm_table > $d/lm_table.md && exec ${SEQMIX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/table_in_results.py ${PROJECT_SOURCE_DIR}/docs/results.md $d/lm_table.md 11")
set_tests_properties(results.lm_three_seeds_matches_results_md PROPERTIES LABELS fast TIMEOUT 60
  PASS_REGULAR_EXPRESSION "results.md quotes all 11 rows of the table headed")

# results.md quotes every kept three-seed table (docs/runs/*/*/seeds.json) as its records give it.
add_test(NAME results.seeds_tables_match_records COMMAND ${SEQMIX_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/seeds_in_results.py
         ${PROJECT_SOURCE_DIR}/docs/results.md ${PROJECT_SOURCE_DIR}/docs/runs)
set_tests_properties(results.seeds_tables_match_records PROPERTIES LABELS fast TIMEOUT 60
  PASS_REGULAR_EXPRESSION "results.md quotes all [0-9]+ kept three-seed tables")

# MAD's paper preset (every setting of a task's ladder, the 6-point lr x wd sweep), each run capped at one
# step: memorization's ladder is 6 settings, 36 runs (two minutes here: the slow label; the preset's plan itself is
# checked in the fast suite by tests/train/mad_preset_test.cpp).
add_test(NAME results.mad_paper_preset_capped COMMAND ${CMAKE_COMMAND} -E env bash -c
         "rm -rf ${SEQMIX_CLI_TMP}/results/mad_paper && exec $<TARGET_FILE:seqmix> mad --preset paper --task mad.memorization --mixer softmax --max-steps 1 --threads 1 --quiet --out ${SEQMIX_CLI_TMP}/results/mad_paper")
set_tests_properties(results.mad_paper_preset_capped PROPERTIES LABELS slow TIMEOUT 600
  PASS_REGULAR_EXPRESSION "\\| `softmax` \\| [0-9.]+ \\| [0-9.]+ \\|.*capped at --max-steps 1: a smoke test")

# --finished-only tabulates what has finished and trains nothing: one capped compression run, then a table over
# compression and memorization whose memorization cell (never run) is a dash, as is the row's average.
add_test(NAME results.mad_finished_only COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/mad_finished && rm -rf $d && $<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --mixer softmax --max-steps 1 --threads 1 --quiet --out $d >/dev/null && $<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --task mad.memorization --mixer softmax --max-steps 1 --finished-only --out $d && if ls -d $d/softmax-*/mad.memorization 2>/dev/null; then echo trained; else echo untouched; fi")
set_tests_properties(results.mad_finished_only PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "\\| `softmax` \\| [0-9.]+ \\| - \\| - \\|.*finished runs only.*untouched")
seqmix_cli_error(mad_finished_only_no_dir "mad: --finished-only tabulates the runs in --out, but '.*/nowhere' is not a directory"
                 mad --preset cpu --mixer softmax --finished-only --out ${SEQMIX_CLI_TMP}/results/nowhere)

# The records scripts/keep_run_records.sh keeps (docs/runs/) are enough for seqmix mad to reuse a run: the
# kept copy of a capped run gives the same score, and seqmix mad on it trains nothing (no checkpoint appears).
add_test(NAME results.keep_run_records COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/keep_run_records && rm -rf $d $d-records && a=$($<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --mixer softmax --max-steps 1 --threads 1 --quiet --out $d | grep '^| `softmax`') && ${PROJECT_SOURCE_DIR}/scripts/keep_run_records.sh $d $d-records && b=$($<TARGET_FILE:seqmix> mad --preset cpu --task mad.compression --mixer softmax --max-steps 1 --threads 1 --quiet --out $d-records | grep '^| `softmax`') && test -z \"$(find $d-records -name checkpoints)\" && echo \"trained: $a\" && echo \"kept:    $b\" && test \"$a\" = \"$b\" && echo same score")
set_tests_properties(results.keep_run_records PROPERTIES LABELS fast TIMEOUT 300
  PASS_REGULAR_EXPRESSION "keep_run_records: 1 finished runs of .*trained: \\| `softmax` \\| [0-9.]+ \\| [0-9.]+ \\|.*same score")

# The table script with --finished-only on a folder where nothing has run: every row, the MomenMHA and NagMHA
# ones included, is dashes, and nothing trains.
add_test(NAME results.mad_table_finished_only COMMAND ${CMAKE_COMMAND} -E env bash -c
         "d=${SEQMIX_CLI_TMP}/results/mad_table_nothing && rm -rf $d && mkdir -p $d && SEQMIX=$<TARGET_FILE:seqmix> ${PROJECT_SOURCE_DIR}/scripts/mad_table.sh $d --preset cpu --task mad.compression --finished-only && test -z \"$(find $d -name config.yaml)\" && echo nothing trained")
set_tests_properties(results.mad_table_finished_only PROPERTIES LABELS fast TIMEOUT 120
  PASS_REGULAR_EXPRESSION "\\| `softmax` \\| - \\| - \\|.*`ela:kernel=sum_sq_euclidean` \\| - \\| - \\|.*`softmax with residual=momentum` \\| - \\| - \\|.*`softmax with residual=nesterov` \\| - \\| - \\|.*nothing trained")
add_test(NAME results.mad_table_finished_only_no_dir COMMAND ${PROJECT_SOURCE_DIR}/scripts/mad_table.sh
         ${SEQMIX_CLI_TMP}/results/mad_table_nowhere --preset cpu --finished-only)
set_tests_properties(results.mad_table_finished_only_no_dir PROPERTIES LABELS fast TIMEOUT 60 WILL_FAIL TRUE)

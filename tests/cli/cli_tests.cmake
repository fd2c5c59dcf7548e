# Command-line tests: bad input gives one clear line and a non-zero exit; good input works.
set(SEQMIX_EXPECT_ERROR ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_error.sh)

function(seqmix_cli_error name regex)
  add_test(NAME cli.${name} COMMAND ${SEQMIX_EXPECT_ERROR} "${regex}" $<TARGET_FILE:seqmix> ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES LABELS fast TIMEOUT 120)
endfunction()

seqmix_cli_error(unknown_mixer "unknown mixer 'nope'; valid mixers: softmax" train --mixer nope --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(unknown_mixer_key "mixer softmax has no option 'hedas'" train --mixer softmax:hedas=2 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bad_option_value "option 'heads' expects an integer" train --mixer softmax:heads=many --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(indivisible_heads "not divisible by heads=5" train --mixer softmax:heads=5 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(unknown_task "unknown task 'mad.nothing'" train --task mad.nothing --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bad_task_option "must be even" train --task mad.in_context_recall:seq_len=63 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(unknown_model_key "model lm has no option 'width'" train --model lm:width=4 --steps 1 --out ${CMAKE_CURRENT_BINARY_DIR}/cli_runs/x)
seqmix_cli_error(bad_steps "steps" train --steps 0)
seqmix_cli_error(unknown_command "" frobnicate)

add_test(NAME cli.list_shows_every_mixer COMMAND $<TARGET_FILE:seqmix> list)
set_tests_properties(cli.list_shows_every_mixer PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "softmax  -.*relu  -.*linear  -.*gla  -.*ssm  -.*mad.in_context_recall")
add_test(NAME cli.info_reports_blas COMMAND $<TARGET_FILE:seqmix> info)
set_tests_properties(cli.info_reports_blas PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "LibTorch +1\\.13.*BLAS +OpenBLAS.*GFLOP/s")

#pragma once
// The seqmix subcommands. Each add_* registers its subcommand on the app; when the command line
// selects it, `action` is set to the function that runs it and returns the exit code.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace seqmix::cli {

using Action = std::function<int()>;

void add_train_command(CLI::App& app, Action& action);
void add_list_command(CLI::App& app, Action& action);
void add_info_command(CLI::App& app, Action& action);
void add_eval_command(CLI::App& app, Action& action);
void add_plot_command(CLI::App& app, Action& action);
void add_mad_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_generate_command(CLI::App& app, Action& action);
// seqmix verify and seqmix export-hf, written in Python (apps/command_python.cpp).
void add_python_commands(CLI::App& app, Action& action);

// Replaces this process with the project's Python running python_arguments (e.g. {"-m", "seqmix", "verify", ...})
// on this checkout's package and this build's library (apps/python_program.cpp); throws Error naming `command` when
// it cannot.
[[noreturn]] void exec_project_python(const std::string& command, const std::vector<std::string>& python_arguments);

}  // namespace seqmix::cli

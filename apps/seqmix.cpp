// seqmix: train, evaluate, benchmark and inspect sequence mixers.
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "commands.h"
#include "seqmix/io/error.h"
#include "seqmix/io/huge_page_allocator.h"

using seqmix::first_line;

int main(int argc, char** argv) {
  seqmix::use_huge_page_allocator();  // large tensors on 2 MiB pages (include/seqmix/io/huge_page_allocator.h)
  CLI::App app{"seqmix: sequence mixers (FEM, HyperMLP, energy attention, ELA and baselines) — train, "
               "evaluate, benchmark"};
  app.require_subcommand(1);
  seqmix::cli::Action action;
  seqmix::cli::add_train_command(app, action);
  seqmix::cli::add_eval_command(app, action);
  seqmix::cli::add_mad_command(app, action);
  seqmix::cli::add_bench_command(app, action);
  seqmix::cli::add_generate_command(app, action);
  seqmix::cli::add_plot_command(app, action);
  seqmix::cli::add_list_command(app, action);
  seqmix::cli::add_info_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "seqmix: error: %s (see seqmix --help)\n", first_line(e.what()).c_str());
    return 2;
  }
  try {
    return action ? action() : 0;
  } catch (const seqmix::Error& e) {
    std::fprintf(stderr, "seqmix: error: %s\n", e.what());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "seqmix: error: %s\n", first_line(e.what_without_backtrace()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqmix: error: %s\n", first_line(e.what()).c_str());
  }
  return 1;
}

// seqmix: train, evaluate, benchmark and inspect sequence mixers.
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "commands.h"
#include "seqmix/io/error.h"
#include "seqmix/io/huge_page_allocator.h"

using seqmix::first_line;

namespace {

// An error as the CLI prints it: its first line, at most kMaxErrorBytes long. A longer one (a message quoting a
// 40 KB value) keeps its head, which names the option or file, and its tail, and says how much is left out.
constexpr size_t kMaxErrorBytes = 1000;

std::string printed_error(const std::string& text) {
  std::string line = first_line(text);
  if (line.size() <= kMaxErrorBytes) return line;
  auto boundary = [&](size_t at) {  // never inside a UTF-8 sequence
    while (at < line.size() && (static_cast<unsigned char>(line[at]) & 0xC0) == 0x80) ++at;
    return at;
  };
  const size_t head = boundary(kMaxErrorBytes * 3 / 4), tail = boundary(line.size() - kMaxErrorBytes / 5);
  return line.substr(0, head) + " [... " + std::to_string(tail - head) + " bytes left out ...] " + line.substr(tail);
}

}  // namespace

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
  seqmix::cli::add_python_commands(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "seqmix: error: %s (see seqmix --help)\n", printed_error(e.what()).c_str());
    return 2;
  }
  try {
    return action ? action() : 0;
  } catch (const seqmix::Error& e) {
    std::fprintf(stderr, "seqmix: error: %s\n", printed_error(e.what()).c_str());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "seqmix: error: %s\n", printed_error(e.what_without_backtrace()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqmix: error: %s\n", printed_error(e.what()).c_str());
  }
  return 1;
}

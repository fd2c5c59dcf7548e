// seqmix info: versions, threads, the torch library and the BLAS it runs on, with its measured speed.
#include <torch/torch.h>
#include <ATen/Version.h>

#include <thread>

#include "commands.h"
#include "seqmix/io/runtime.h"

namespace seqmix::cli {
namespace {

int run_info() {
  const double gflops = matmul_gflops(1024);
  std::printf("seqmix       %s\n", SEQMIX_VERSION);
  std::printf("torch        %s\n", torch_description().c_str());
  std::printf("threads      %d intra-op (hardware: %u)\n", at::get_num_threads(), std::thread::hardware_concurrency());
  std::printf("BLAS         %s\n", blas_description().c_str());
  std::printf("CPU kernels  %s (ATen's vectorised kernels)\n", at::get_cpu_capability().c_str());
  std::printf("matmul       %.1f GFLOP/s (1024x1024 fp32, median of 7, %d threads)\n", gflops, at::get_num_threads());
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("info", "versions, threads, BLAS library and its measured GFLOP/s");
  auto threads = std::make_shared<int>(0);
  sub->add_option("--threads", *threads, "intra-op threads (0 = all hardware threads)");
  sub->callback([&action, threads] {
    action = [threads] {
      set_threads(*threads);
      return run_info();
    };
  });
}

}  // namespace seqmix::cli

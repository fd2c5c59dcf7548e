// seqmix info: versions, threads, and which BLAS is loaded with its measured speed.
#include <torch/torch.h>
#include <torch/version.h>

#include <thread>

#include "commands.h"
#include "seqmix/io/runtime.h"

namespace seqmix::cli {
namespace {

int run_info() {
  // Measured first, so the BLAS library is loaded before it is described.
  const double gflops = matmul_gflops(1024);
  const auto libs = loaded_blas_libraries();
  std::printf("seqmix       %s\n", SEQMIX_VERSION);
  std::printf("LibTorch     %s\n", TORCH_VERSION);
  std::printf("threads      %d intra-op (hardware: %u); BLAS calls single-threaded inside them\n",
              at::get_num_threads(), std::thread::hardware_concurrency());
  std::printf("BLAS         %s\n", blas_description().c_str());
  for (const auto& l : libs) std::printf("             %s\n", l.c_str());
  std::printf("matmul       %.1f GFLOP/s (1024x1024 fp32, median of 7, %d BLAS threads)\n", gflops,
              at::get_num_threads());
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

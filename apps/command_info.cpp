// seqmix info: versions, threads, and which BLAS is loaded with its measured speed.
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "commands.h"
#include "seqmix/io/runtime.h"

namespace seqmix::cli {
namespace {

double matmul_gflops(int64_t n) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  for (int i = 0; i < 2; ++i) a.mm(b);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto c = a.mm(b);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return 2.0 * static_cast<double>(n * n * n) / times[times.size() / 2] / 1e9;
}

int run_info() {
  // Measured with the BLAS library's own threads (its full speed), first, so the library is loaded.
  set_blas_threads(at::get_num_threads());
  const double gflops = matmul_gflops(1024);
  set_blas_threads(1);
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

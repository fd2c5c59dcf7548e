// seqmix info: versions, threads, the torch library and the BLAS it runs on, with its measured speed, and the GPUs.
#include <torch/torch.h>
#include <ATen/Version.h>

#include <thread>

#include "commands.h"
#include "seqmix/io/runtime.h"
#include "seqmix/train/device.h"

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
  if (!cuda_built()) {
    std::printf("GPUs         none: built without CUDA support (SEQMIX_CUDA=OFF)\n");
    return 0;
  }
  const std::vector<GpuFacts> gpus = visible_gpus();
  if (gpus.empty()) std::printf("GPUs         none visible (CUDA support built; --device cuda needs one)\n");
  for (const GpuFacts& g : gpus)
    std::printf("GPU %-8s %s, %.1f GiB, compute capability %d.%d\n", ("cuda:" + std::to_string(g.index)).c_str(),
                g.name.c_str(), static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0 * 1024.0), g.major, g.minor);
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("info", "versions, threads, BLAS library and its measured GFLOP/s, the visible GPUs");
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

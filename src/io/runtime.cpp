#include "seqmix/io/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <chrono>
#include <regex>
#include <thread>
#include <vector>

#include "seqmix/io/error.h"

namespace seqmix {

void set_threads(int n) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Far more threads than cores only contend; 1,024 on 2 cores was reported to hang.
  if (n > 8 * hardware)
    throw Error("threads=" + std::to_string(n) + " is more than 8 times this machine's " + std::to_string(hardware) +
                " hardware threads; use 0 (all of them) or at most " + std::to_string(8 * hardware));
  at::set_num_threads(n > 0 ? n : hardware);
}

std::string torch_description() {
  std::string text = TORCH_VERSION;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&at::show_config), &info) != 0 && info.dli_fname != nullptr)
    text += std::string(" (") + info.dli_fname + ")";
  return text;
}

std::string blas_description() {
  // show_config's "BLAS_INFO=<name>," names the BLAS ATen was built with.
  const std::string config = at::show_config();
  std::smatch m;
  const std::string blas =
      std::regex_search(config, m, std::regex("BLAS_INFO=([^,\\s]+)")) ? m[1].str() : std::string("unknown");
  if (blas == "mkl" && at::hasMKL()) {
    // get_mkl_version(): "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build ..."
    const std::string version = at::get_mkl_version();
    const std::string number =
        std::regex_search(version, m, std::regex("Version ([0-9][0-9.]*)")) ? m[1].str() : std::string("(version unknown)");
    return "Intel MKL " + number + " (inside libtorch_cpu.so, on ATen's OpenMP threads)";
  }
  return blas + " (BLAS_INFO of this LibTorch)";
}

double matmul_gflops(int64_t n) {
  at::NoGradGuard no_grad;
  const auto a = at::randn({n, n}), b = at::randn({n, n});
  for (int i = 0; i < 2; ++i) a.mm(b);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto c = a.mm(b);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return 2.0 * static_cast<double>(n * n * n) / times[times.size() / 2] / 1e9;
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  return text;
}

}  // namespace seqmix

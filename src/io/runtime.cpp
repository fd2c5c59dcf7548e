#include "seqmix/io/runtime.h"

#include <dlfcn.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

namespace seqmix {
namespace {

template <typename Fn>
Fn openblas_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void set_threads(int n) {
  const int threads = n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  set_blas_threads(1);
}

bool set_blas_threads(int n) {
  if (auto fn = openblas_symbol<void (*)(int)>("openblas_set_num_threads")) {
    fn(n);
    return true;
  }
  return false;
}

int blas_threads() {
  if (auto fn = openblas_symbol<int (*)()>("openblas_get_num_threads")) return fn();
  return 0;
}

std::set<std::string> loaded_blas_libraries() {
  std::set<std::string> libs;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    if (file.find("blas") != std::string::npos) libs.insert(path);
  }
  return libs;
}

std::string blas_description() {
  if (auto fn = openblas_symbol<char* (*)()>("openblas_get_config")) return std::string("OpenBLAS (") + fn() + ")";
  const auto libs = loaded_blas_libraries();
  for (const auto& l : libs)
    if (l.find("openblas") != std::string::npos) return "OpenBLAS";
  for (const auto& l : libs)
    if (l.find("/blas/") != std::string::npos) return "reference BLAS (slow: install libopenblas0-pthread)";
  return libs.empty() ? "none loaded yet" : "unknown";
}

double matmul_gflops(int64_t n) {
  at::NoGradGuard no_grad;
  set_blas_threads(at::get_num_threads());
  const auto a = at::randn({n, n}), b = at::randn({n, n});
  for (int i = 0; i < 2; ++i) a.mm(b);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto c = a.mm(b);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  set_blas_threads(1);
  std::sort(times.begin(), times.end());
  return 2.0 * static_cast<double>(n * n * n) / times[times.size() / 2] / 1e9;
}

}  // namespace seqmix

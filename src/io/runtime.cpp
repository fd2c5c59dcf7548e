#include "seqmix/io/runtime.h"

#include <dlfcn.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <fstream>
#include <thread>

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

}  // namespace seqmix

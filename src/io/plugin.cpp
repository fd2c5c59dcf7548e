#include "seqmix/io/plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

#include "seqmix/io/error.h"

namespace seqmix {

void* open_plugin(const std::string& what, const std::string& file_name, const std::string& build_path, int flags) {
  std::vector<std::string> candidates;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back((exe.parent_path() / file_name).string());
  candidates.push_back(build_path);
  std::string reasons;
  for (const auto& path : candidates) {
    if (!std::filesystem::exists(path)) continue;
    if (void* handle = dlopen(path.c_str(), flags)) return handle;
    reasons += std::string(" ") + dlerror();
  }
  throw Error(what + ": cannot load the plugin " + file_name + " (looked next to the program and in " + build_path +
              ")" + reasons);
}

void* plugin_symbol(void* handle, const std::string& what, const char* name) {
  void* symbol = dlsym(handle, name);
  if (!symbol) throw Error(what + ": the plugin lacks " + std::string(name));
  return symbol;
}

}  // namespace seqmix

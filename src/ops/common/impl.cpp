#include "seqmix/ops/impl.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/TensorOptions.h>

#include <set>

#include "seqmix/io/error.h"

namespace seqmix::ops {

Impl parse_impl(const std::string& name) {
  if (name == "fused") return Impl::fused;
  if (name == "naive") return Impl::naive;
  if (name == "torch") return Impl::torch;
  if (name == "chunked") return Impl::chunked;
  if (name == "auto") return Impl::automatic;
  throw Error("unknown impl '" + name + "'; valid impls: auto, fused, naive, torch, chunked");
}

std::string impl_name(Impl impl) {
  switch (impl) {
    case Impl::fused: return "fused";
    case Impl::naive: return "naive";
    case Impl::torch: return "torch";
    case Impl::chunked: return "chunked";
    case Impl::automatic: return "auto";
  }
  return "unknown";
}

std::vector<Impl> ImplSet::list() const {
  std::vector<Impl> out;
  for (Impl i : {Impl::fused, Impl::naive, Impl::torch, Impl::chunked})
    if (contains(i)) out.push_back(i);
  return out;
}

std::string ImplSet::names() const {
  std::string out;
  for (Impl i : list()) out += (out.empty() ? "" : ", ") + impl_name(i);
  return out;
}

namespace {
std::set<std::string>& gpu_kernels_passed() {
  static std::set<std::string> names;
  return names;
}
}  // namespace

GpuKernelPassed::GpuKernelPassed(const char* kernel_operator) { gpu_kernels_passed().insert(kernel_operator); }
bool gpu_kernel_passed(const char* kernel_operator) { return gpu_kernels_passed().count(kernel_operator) > 0; }

bool kernel_registered_on(const char* name, const c10::Device& device) {
  const auto op = c10::Dispatcher::singleton().findSchema({name, ""});
  if (!op) throw std::logic_error(std::string("seqmix: the kernel operator ") + name + " is not defined");
  const c10::DispatchKey key = device.is_meta() ? c10::DispatchKey::CUDA
                                                : c10::computeDispatchKey(std::nullopt, std::nullopt, device);
  return op->hasKernelForDispatchKey(key);
}

ImplSet registered_on(const ImplSet& set, const c10::Device& device) {
  ImplSet out = set;
  for (int i = 0; i < set.kernels_; ++i)
    if (!kernel_registered_on(set.fused_kernels_[i], device)) out.bits_ &= ~ImplSet::bit(Impl::fused);
  return out;
}

Impl check_impl(Impl requested, const ImplSet& available, const std::string& op, const c10::Device& device) {
  const ImplSet here = registered_on(available, device);
  if (requested == Impl::automatic) {
    bool fused_first = true;
    if (!device.is_cpu())
      for (const char* kernel : available.fused_kernels()) fused_first = fused_first && gpu_kernel_passed(kernel);
    for (Impl i : {Impl::fused, Impl::torch, Impl::chunked, Impl::naive})
      if (here.contains(i) && (i != Impl::fused || fused_first)) return i;
  }
  if (here.contains(requested)) return requested;
  const std::string where = device.is_cpu() ? "" : " on " + device.str();
  std::string why;
  if (requested == Impl::torch && !available.contains(requested)) why = " (PyTorch has no kernel for it)";
  if (requested == Impl::fused && available.contains(requested)) {
    for (const char* kernel : available.fused_kernels())
      if (!kernel_registered_on(kernel, device)) {
        why = std::string(" (its kernel ") + kernel + " has none registered for " +
              c10::DeviceTypeName(device.is_meta() ? c10::kCUDA : device.type(), /*lower_case=*/true) + ")";
        break;
      }
  }
  throw Error(op + " has no impl '" + impl_name(requested) + "'" + where + why + "; its impls" +
              (where.empty() ? "" : " there") + ": auto, " + here.names());
}

}  // namespace seqmix::ops

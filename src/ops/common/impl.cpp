#include "seqmix/ops/impl.h"

#include "seqmix/io/error.h"

#ifndef SEQMIX_CUDA_KERNELS
#define SEQMIX_CUDA_KERNELS 0
#endif

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

bool cuda_kernels_built() { return SEQMIX_CUDA_KERNELS != 0; }

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

ImplSet ImplSet::on(const c10::Device& device) const {
  ImplSet out = *this;
  // Every device beyond the CPU is treated as CUDA (the meta device too, where the tests check what runs on a GPU).
  // A family's CUDA kernel exists when the build compiled the CUDA sources (SEQMIX_CUDA with a CUDA torch).
  const bool fused_runs = device.is_cpu() || (fused_on_cuda_ && cuda_kernels_built());
  if (!fused_runs) out.bits_ &= ~bit(Impl::fused);
  return out;
}

Impl check_impl(Impl requested, const ImplSet& available, const std::string& op, const c10::Device& device) {
  const ImplSet here = available.on(device);
  if (requested == Impl::automatic) {
    for (Impl i : {Impl::fused, Impl::torch, Impl::chunked, Impl::naive})
      if (here.contains(i)) return i;
  }
  if (here.contains(requested)) return requested;
  const std::string where = device.is_cpu() ? "" : " on " + device.str();
  std::string why;
  if (requested == Impl::torch && !available.contains(requested)) why = " (PyTorch has no kernel for it)";
  if (requested == Impl::fused && available.contains(requested)) why = " (its fused kernel is CPU code)";
  throw Error(op + " has no impl '" + impl_name(requested) + "'" + where + why + "; its impls" +
              (where.empty() ? "" : " there") + ": auto, " + here.names());
}

}  // namespace seqmix::ops

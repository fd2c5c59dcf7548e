#include "seqmix/ops/impl.h"

#include "seqmix/io/error.h"

namespace seqmix::ops {

Impl parse_impl(const std::string& name) {
  if (name == "fused") return Impl::fused;
  if (name == "naive") return Impl::naive;
  if (name == "torch") return Impl::torch;
  throw Error("unknown impl '" + name + "'; valid impls: fused, naive, torch");
}

std::string impl_name(Impl impl) {
  switch (impl) {
    case Impl::fused: return "fused";
    case Impl::naive: return "naive";
    case Impl::torch: return "torch";
  }
  return "unknown";
}

bool runs_fused(Impl impl, const char* op) {
  if (impl == Impl::torch)
    throw Error(std::string(op) + " has no impl 'torch' (PyTorch has no kernel for it); its impls: fused, naive");
  return impl == Impl::fused;
}

}  // namespace seqmix::ops

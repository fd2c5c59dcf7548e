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

std::vector<Impl> ImplSet::list() const {
  std::vector<Impl> out;
  for (Impl i : {Impl::fused, Impl::naive, Impl::torch})
    if (contains(i)) out.push_back(i);
  return out;
}

std::string ImplSet::names() const {
  std::string out;
  for (Impl i : list()) out += (out.empty() ? "" : ", ") + impl_name(i);
  return out;
}

Impl check_impl(Impl requested, const ImplSet& available, const std::string& op) {
  if (available.contains(requested)) return requested;
  const std::string why = requested == Impl::torch ? " (PyTorch has no kernel for it)" : "";
  throw Error(op + " has no impl '" + impl_name(requested) + "'" + why + "; its impls: " + available.names());
}

}  // namespace seqmix::ops

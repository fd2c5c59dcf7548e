#include "seqmix/ops/impl.h"

#include "seqmix/io/error.h"

namespace seqmix::ops {

Impl parse_impl(const std::string& name) {
  if (name == "fused") return Impl::fused;
  if (name == "naive") return Impl::naive;
  throw Error("unknown impl '" + name + "'; valid impls: fused, naive");
}

}  // namespace seqmix::ops

#pragma once
// Which implementation of an op a mixer runs: the fused kernel (default) or its naive twin.
#include <string>

namespace seqmix::ops {

enum class Impl { fused, naive };

// "fused" or "naive"; anything else throws seqmix::Error naming the valid values.
Impl parse_impl(const std::string& name);

}  // namespace seqmix::ops

#pragma once
// Which implementation of an op a mixer runs: the fused kernel (default), its naive twin, or PyTorch's own
// kernel where PyTorch has one (softmax attention: at::scaled_dot_product_attention).
#include <string>

namespace seqmix::ops {

enum class Impl { fused, naive, torch };

// "fused", "naive" or "torch"; anything else throws seqmix::Error naming the valid values.
Impl parse_impl(const std::string& name);
std::string impl_name(Impl impl);

// Whether an op with only fused and naive implementations runs fused; throws seqmix::Error naming `op` for
// Impl::torch, which it lacks.
bool runs_fused(Impl impl, const char* op);

}  // namespace seqmix::ops

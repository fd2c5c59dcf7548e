#pragma once
// Which implementation of an op runs: the fused kernel (default), its naive twin (the readable ground truth),
// or PyTorch's own kernel where PyTorch has one (softmax attention: at::scaled_dot_product_attention). Each op
// family's entry point takes the choice and declares the set it has (its header's k...Impls).
#include <initializer_list>
#include <string>
#include <vector>

namespace seqmix::ops {

enum class Impl { fused, naive, torch };

// "fused", "naive" or "torch"; anything else throws seqmix::Error naming the valid values.
Impl parse_impl(const std::string& name);
std::string impl_name(Impl impl);

// The implementations an op family has.
class ImplSet {
 public:
  constexpr ImplSet(std::initializer_list<Impl> impls) {
    for (Impl i : impls) bits_ |= bit(i);
  }
  constexpr bool contains(Impl impl) const { return (bits_ & bit(impl)) != 0; }
  std::vector<Impl> list() const;  // in the order fused, naive, torch
  std::string names() const;       // e.g. "fused, naive"

 private:
  static constexpr unsigned bit(Impl impl) { return 1u << static_cast<unsigned>(impl); }
  unsigned bits_ = 0;
};

constexpr ImplSet kFusedAndNaive{Impl::fused, Impl::naive};

// `requested`, when `op` has it; otherwise throws seqmix::Error "<op> has no impl '<x>'; its impls: ...".
Impl check_impl(Impl requested, const ImplSet& available, const std::string& op);

}  // namespace seqmix::ops

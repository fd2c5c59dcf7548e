#pragma once
// Which implementation of an op runs: the fused kernel, its naive twin (the readable ground truth), PyTorch's own
// kernel where PyTorch has one (softmax attention: at::scaled_dot_product_attention), or the chunked form in ATen
// matrix products (the linear scans: O(T) memory on any device); "auto" (the default) picks the fastest one the
// inputs' device has. Each op family's entry point takes the choice and declares the set it has (k...Impls).
#include <c10/core/Device.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace seqmix::ops {

enum class Impl { fused, naive, torch, chunked, automatic };

// "fused", "naive", "torch", "chunked" or "auto"; anything else throws seqmix::Error naming the valid values.
Impl parse_impl(const std::string& name);
std::string impl_name(Impl impl);

// The implementations an op family has, and the devices each runs on. The naive twins, PyTorch's kernels and the
// chunked forms are ATen code, so they run wherever ATen does; a fused kernel is CPU code unless the family also
// registers a CUDA kernel for it (fused_on_cuda, and the build compiled the CUDA sources).
class ImplSet {
 public:
  constexpr ImplSet(std::initializer_list<Impl> impls, bool fused_on_cuda = false) : fused_on_cuda_(fused_on_cuda) {
    for (Impl i : impls) bits_ |= bit(i);
  }
  constexpr bool contains(Impl impl) const { return (bits_ & bit(impl)) != 0; }
  std::vector<Impl> list() const;  // in the order fused, naive, torch, chunked
  std::string names() const;       // e.g. "fused, naive"
  // The subset that runs on `device`: the CPU, or CUDA (any other device, e.g. meta, is taken as CUDA).
  ImplSet on(const c10::Device& device) const;

 private:
  static constexpr unsigned bit(Impl impl) { return 1u << static_cast<unsigned>(impl); }
  unsigned bits_ = 0;
  bool fused_on_cuda_ = false;
};

constexpr ImplSet kFusedAndNaive{Impl::fused, Impl::naive};

// Whether this build compiled the op families' CUDA kernels (src/ops/*/*.cu: SEQMIX_CUDA with a CUDA torch).
bool cuda_kernels_built();

// The implementation that runs for `requested` on `device`: `auto` picks the fastest the device has (fused, then
// PyTorch's, then chunked, then the naive twin); a named one runs when `op` has it there, else throws seqmix::Error
// "<op> has no impl '<x>' on <device>; its impls there: ...".
Impl check_impl(Impl requested, const ImplSet& available, const std::string& op, const c10::Device& device);

}  // namespace seqmix::ops

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

// The implementations an op family has. The naive twins, PyTorch's kernels and the chunked forms are ATen code, so
// they run wherever ATen does. A fused form is either ATen code too (no fused kernels: it runs anywhere) or calls
// kernel operators of its own, e.g. "seqmix::_gla_forward", whose device kernels each register themselves with
// PyTorch's dispatcher from their own file (TORCH_LIBRARY_IMPL(seqmix, CUDA, m) in a CUDA kernel's file): the
// dispatcher, not this set, knows which devices the fused form runs on (registered_on below).
class ImplSet {
 public:
  static constexpr int kMaxFusedKernels = 2;
  constexpr ImplSet(std::initializer_list<Impl> impls, std::initializer_list<const char*> fused_kernels = {}) {
    for (Impl i : impls) bits_ |= bit(i);
    for (const char* k : fused_kernels)
      if (kernels_ < kMaxFusedKernels) fused_kernels_[kernels_++] = k;
  }
  constexpr bool contains(Impl impl) const { return (bits_ & bit(impl)) != 0; }
  std::vector<Impl> list() const;  // in the order fused, naive, torch, chunked
  std::string names() const;       // e.g. "fused, naive"
  // The kernel operators the fused form calls ("seqmix::_gla_forward"); none when the fused form is ATen code.
  std::vector<const char*> fused_kernels() const { return {fused_kernels_, fused_kernels_ + kernels_}; }

 private:
  friend ImplSet registered_on(const ImplSet& set, const c10::Device& device);
  static constexpr unsigned bit(Impl impl) { return 1u << static_cast<unsigned>(impl); }
  unsigned bits_ = 0;
  const char* fused_kernels_[kMaxFusedKernels] = {};
  int kernels_ = 0;
};

// The subset of `set` that runs on `device`, as the dispatcher has it: every ATen form, and the fused form when each
// of its kernel operators has a kernel registered for the device's dispatch key. The meta device stands for a GPU (CUDA's
// kernels), so that what runs on one can be checked without one.
ImplSet registered_on(const ImplSet& set, const c10::Device& device);

// Whether the kernel operator `name` ("seqmix::_gla_forward") has a kernel for `device` (meta: CUDA's), as above.
bool kernel_registered_on(const char* name, const c10::Device& device);

// A GPU kernel that has passed scripts/gpu_check.sh on a GPU says so from its own file, beside its registration:
//   SEQMIX_GPU_KERNEL_PASSED(seqmix, _fem_softmax_forward);
// Until then `auto` on a GPU leaves the fused form that calls it to impl="fused" and picks the ATen forms. (A CPU
// kernel is tested here at every commit, so auto on the CPU always takes it.)
struct GpuKernelPassed {
  explicit GpuKernelPassed(const char* kernel_operator);
};
bool gpu_kernel_passed(const char* kernel_operator);
#define SEQMIX_GPU_KERNEL_PASSED(ns, name) \
  static const ::seqmix::ops::GpuKernelPassed seqmix_gpu_kernel_passed_##name(#ns "::" #name)

// The implementation that runs for `requested` on `device`: `auto` picks the fastest the device has (fused, where its
// kernels have passed on a GPU when the device is one, then PyTorch's, then chunked, then the naive twin); a named one runs when `op` has it there, else throws seqmix::Error
// "<op> has no impl '<x>' on <device>; its impls there: ...".
Impl check_impl(Impl requested, const ImplSet& available, const std::string& op, const c10::Device& device);

}  // namespace seqmix::ops

// Which implementation runs on a device is the dispatcher's answer: a fused form that calls kernel operators runs
// where each has a kernel registered for the device (a GPU kernel registers itself from its own file with
// TORCH_LIBRARY_IMPL), and a fused form written in ATen runs everywhere, whatever the build compiled. The meta
// device stands for a GPU.
#include <gtest/gtest.h>
#include <torch/library.h>
#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/hypermlp.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/second_order.h"

namespace seqmix {
namespace {

at::Tensor identity(const at::Tensor& x) { return x; }

}  // namespace
}  // namespace seqmix

// A kernel operator of this test's own with a CPU kernel only, as a CPU family's fused kernel is.
TORCH_LIBRARY(seqmix_device_test, m) {
  m.def("_kernel(Tensor x) -> Tensor");
  m.impl("_kernel", torch::dispatch(c10::DispatchKey::CPU, TORCH_FN(seqmix::identity)));
}

namespace seqmix {
namespace {

using ops::Impl;
const c10::Device kCpu(c10::kCPU), kMeta(c10::kMeta), kCuda(c10::kCUDA);
constexpr ops::ImplSet kTestImpls{{Impl::fused, Impl::naive}, {"seqmix_device_test::_kernel"}};

TEST(DeviceRegistration, AFusedFormRunsWhereItsKernelOperatorHasAKernel) {
  EXPECT_EQ(ops::check_impl(Impl::automatic, kTestImpls, "test", kCpu), Impl::fused);
  EXPECT_EQ(ops::check_impl(Impl::automatic, kTestImpls, "test", kMeta), Impl::naive);
  EXPECT_EQ(ops::registered_on(kTestImpls, kCuda).names(), "naive");
  try {
    ops::check_impl(Impl::fused, kTestImpls, "test", kMeta);
    FAIL() << "fused ran without a CUDA kernel";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "test has no impl 'fused' on meta (its kernel seqmix_device_test::_kernel has none "
                           "registered for cuda); its impls there: auto, naive");
  }
  {
    // A CUDA kernel registering itself, as a kernel's own file does, is all it takes.
    torch::Library cuda(torch::Library::IMPL, "seqmix_device_test", c10::DispatchKey::CUDA, __FILE__, __LINE__);
    cuda.impl("_kernel", TORCH_FN(identity));
    EXPECT_EQ(ops::registered_on(kTestImpls, kCuda).names(), "fused, naive");
    EXPECT_EQ(ops::check_impl(Impl::fused, kTestImpls, "test", kMeta), Impl::fused);
    // ... but auto takes a GPU kernel only once it has passed on a GPU, which its file says.
    EXPECT_EQ(ops::check_impl(Impl::automatic, kTestImpls, "test", kMeta), Impl::naive);
    EXPECT_EQ(ops::check_impl(Impl::automatic, kTestImpls, "test", kCpu), Impl::fused);
    const ops::GpuKernelPassed passed("seqmix_device_test::_kernel");
    EXPECT_EQ(ops::check_impl(Impl::automatic, kTestImpls, "test", kMeta), Impl::fused);
  }
  // The registration ends with its library.
  EXPECT_EQ(ops::check_impl(Impl::fused, kTestImpls, "test", kCpu), Impl::fused);
  EXPECT_EQ(ops::registered_on(kTestImpls, kMeta).names(), "naive");
}

TEST(DeviceRegistration, EveryFusedFormWrittenInAtenIsWhatAutoPicksOnAGpu) {
  // HyperMLP's blocked read and the second-order reads are ATen code: a CUDA torch runs them without any compiled
  // CUDA source, and auto must not fall back to their O(T^2) naive twins there.
  for (const ops::ImplSet& set : {ops::kHypermlpReadImpls, ops::kSecondOrderImpls}) {
    EXPECT_TRUE(set.fused_kernels().empty());
    EXPECT_EQ(ops::check_impl(Impl::automatic, set, "aten", kMeta), Impl::fused);
    EXPECT_EQ(ops::check_impl(Impl::automatic, set, "aten", kCuda), Impl::fused);
  }
  // GLA's GPU kernels passed on a GPU: auto takes them where the build has them (SEQMIX_CUDA), else the chunked form.
  const bool gpu_kernels = ops::kernel_registered_on("seqmix::_gla_forward", kCuda);
  EXPECT_EQ(ops::check_impl(Impl::automatic, ops::kGlaImpls, "gla", kMeta), gpu_kernels ? Impl::fused : Impl::chunked);
}

TEST(DeviceRegistration, AnUndefinedKernelOperatorIsAProgrammingError) {
  constexpr ops::ImplSet missing{{Impl::fused, Impl::naive}, {"seqmix_device_test::_no_such_kernel"}};
  EXPECT_THROW(ops::check_impl(Impl::automatic, missing, "test", kCpu), std::logic_error);
}

}  // namespace
}  // namespace seqmix

// The C++ side of the GPU kernels, run without a GPU: each kernel operator's CUDA kernel (src/ops/<family>/
// fused_cuda.cpp, the Triton kernels compiled ahead of time) is called through the dispatcher's CUDA entry on CPU
// tensors under triton::DryRun, which checks every launch's arguments against the compiled kernel's signature and
// records it instead of reaching a driver. So the entries the kernels find (one per dtype, head widths, decay and
// architecture), the grids, the argument lists and the outputs' shapes and dtypes are tested at every commit; the
// numbers the kernels compute are tested under Triton's interpreter (python/tests/test_triton.py) and on a GPU
// (scripts/gpu_check.sh).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "../../src/ops/common/triton_launch.h"
#include "seqmix/io/error.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/linear_attention.h"

namespace seqmix {
namespace {

using Tensors = std::vector<at::Tensor>;
using Optional = c10::optional<at::Tensor>;
const c10::DispatchKeySet kCudaKernel(c10::DispatchKey::CUDA);

bool built_with_gpu_kernels() { return ops::kernel_registered_on("seqmix::_gla_forward", c10::Device(c10::kCUDA)); }
#define SKIP_WITHOUT_GPU_KERNELS()                                                                            \
  if (!built_with_gpu_kernels())                                                                              \
  GTEST_SKIP() << "this build has no CUDA kernels (SEQMIX_CUDA is off: torch has no CUDA), so nothing to check"

template <class Signature>
c10::TypedOperatorHandle<Signature> kernel_operator(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
at::ScalarType dtype_of(const std::string& name) {
  return name == "float32" ? at::kFloat : name == "float16" ? at::kHalf : at::kBFloat16;
}
const char* name_of(at::ScalarType t) { return t == at::kFloat ? "float32" : t == at::kHalf ? "float16" : "bfloat16"; }
int64_t block_for(int64_t d) { return d <= 64 ? 64 : 128; }

using FemForward = Tensors(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double, bool,
                           double, const Optional&);
using FemBackward = Tensors(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, double, bool, double, const Optional&);
using GlaForward = Tensors(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const Optional&);
using GlaBackward = Tensors(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, const at::Tensor&, const Optional&);

struct FemCase {
  at::ScalarType dtype;
  int64_t B, T, S, H, dk, dv;
  bool causal, masked;
};

// Forward and backward of one case under a dry run on `arch`: the kernels, grids and outputs.
void check_fem(const FemCase& c, int arch) {
  SCOPED_TRACE(std::string(name_of(c.dtype)) + " sm_" + std::to_string(arch) + " B,T,S,H=" + std::to_string(c.B) +
               "," + std::to_string(c.T) + "," + std::to_string(c.S) + "," + std::to_string(c.H) +
               " dk,dv=" + std::to_string(c.dk) + "," + std::to_string(c.dv) + (c.causal ? " causal" : "") +
               (c.masked ? " masked" : ""));
  const auto options = torch::TensorOptions().dtype(c.dtype);
  const auto q = torch::randn({c.B, c.T, c.H, c.dk}, options), k = torch::randn({c.B, c.S, c.H, c.dk}, options);
  const auto v = torch::randn({c.B, c.S, c.H, c.dv}, options), beta = torch::rand({c.H * c.dv}, options) + 0.5;
  Optional mask;
  if (c.masked) {
    auto m = torch::ones({c.B, c.S}, torch::kBool);
    m.index_put_({0}, false);  // an all-masked row
    mask = m;
  }
  triton::DryRun dry(arch);
  const auto out = kernel_operator<FemForward>("seqmix::_fem_softmax_forward")
                       .redispatch(kCudaKernel, q, k, v, beta, 20.0, c.causal, 0.125, mask);
  ASSERT_EQ(dry.launches().size(), 1u);
  const auto& fwd = *dry.launches()[0].entry;
  EXPECT_STREQ(fwd.kernel, "fem_softmax_read_fwd_kernel");
  EXPECT_EQ(fwd.dtype, std::string(name_of(c.dtype)));
  EXPECT_EQ(fwd.arch, arch);
  EXPECT_EQ(triton::constexpr_of(fwd, "BLOCK_DK"), block_for(c.dk));
  EXPECT_EQ(triton::constexpr_of(fwd, "BLOCK_DV"), block_for(c.dv));
  EXPECT_EQ(dry.launches()[0].grid.x, cdiv(c.T, triton::constexpr_of(fwd, "BLOCK_M")));
  EXPECT_EQ(dry.launches()[0].grid.y, c.B * c.H);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{c.B, c.T, c.H, c.dv}));
  EXPECT_EQ(out[0].scalar_type(), at::kFloat);
  EXPECT_EQ(out[1].sizes(), out[0].sizes());
  EXPECT_EQ(out[2].sizes(), (std::vector<int64_t>{c.B, c.H, c.T}));  // the Meta kernel's lse

  const auto grads = kernel_operator<FemBackward>("seqmix::_fem_softmax_backward")
                         .redispatch(kCudaKernel, torch::randn_like(out[0]), torch::randn_like(out[1]), q, k, v,
                                     beta, out[0].zero_(), out[1].zero_(), out[2].zero_(), 20.0, c.causal, 0.125,
                                     mask);
  ASSERT_EQ(dry.launches().size(), 3u);
  const auto& dkdv = *dry.launches()[1].entry;
  const auto& dq = *dry.launches()[2].entry;
  EXPECT_STREQ(dkdv.kernel, "fem_softmax_read_bwd_dkdv_kernel");
  EXPECT_STREQ(dq.kernel, "fem_softmax_read_bwd_dq_kernel");
  EXPECT_EQ(dry.launches()[1].grid.x, cdiv(c.S, triton::constexpr_of(dkdv, "BLOCK_N")));
  EXPECT_EQ(dry.launches()[2].grid.x, cdiv(c.T, triton::constexpr_of(dq, "BLOCK_M")));
  ASSERT_EQ(grads.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const at::Tensor& input = i == 0 ? q : i == 1 ? k : i == 2 ? v : beta;
    EXPECT_EQ(grads[i].sizes(), input.sizes()) << "gradient " << i;
    EXPECT_EQ(grads[i].scalar_type(), c.dtype) << "gradient " << i;
  }
}

TEST(TritonDispatch, FemReadLaunchesItsCompiledKernelsForEveryDtypeWidthAndArchitecture) {
  SKIP_WITHOUT_GPU_KERNELS();
  for (int arch : {80, 90}) {
    for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      check_fem({dtype, 2, 70, 70, 3, 64, 64, true, false}, arch);
      check_fem({dtype, 1, 5, 33, 2, 16, 128, false, true}, arch);
      check_fem({dtype, 2, 1, 1, 1, 80, 48, true, true}, arch);
      check_fem({dtype, 1, 129, 130, 2, 128, 32, true, false}, arch);
    }
  }
}

struct GlaCase {
  at::ScalarType dtype;
  int64_t B, T, H, dk, dv;
  bool per_key;
  std::vector<int64_t> cu;  // packed sequences (B = 1), or none
};

void check_gla(const GlaCase& c, int arch) {
  SCOPED_TRACE(std::string(name_of(c.dtype)) + " sm_" + std::to_string(arch) + " B,T,H=" + std::to_string(c.B) +
               "," + std::to_string(c.T) + "," + std::to_string(c.H) + " dk,dv=" + std::to_string(c.dk) + "," +
               std::to_string(c.dv) + (c.per_key ? " per key" : " per head") + (c.cu.empty() ? "" : " packed"));
  const auto options = torch::TensorOptions().dtype(c.dtype);
  const auto q = torch::randn({c.B, c.T, c.H, c.dk}, options), k = torch::randn({c.B, c.T, c.H, c.dk}, options);
  const auto v = torch::randn({c.B, c.T, c.H, c.dv}, options);
  const auto a = c.per_key ? -torch::rand({c.B, c.T, c.H, c.dk}, options) : -torch::rand({c.B, c.T, c.H}, options);
  Optional cu;
  if (!c.cu.empty()) cu = torch::tensor(c.cu, torch::kLong);
  const int64_t sequences = c.cu.empty() ? c.B : static_cast<int64_t>(c.cu.size()) - 1;
  triton::DryRun dry(arch);
  const auto out = kernel_operator<GlaForward>("seqmix::_gla_forward").redispatch(kCudaKernel, q, k, v, a, cu);
  ASSERT_EQ(dry.launches().size(), 1u);
  const auto& fwd = *dry.launches()[0].entry;
  EXPECT_STREQ(fwd.kernel, "chunk_gla_fwd_kernel");
  EXPECT_EQ(fwd.dtype, std::string(name_of(c.dtype)));
  EXPECT_EQ(fwd.arch, arch);
  EXPECT_EQ(triton::constexpr_of(fwd, "BK"), block_for(c.dk));
  EXPECT_EQ(triton::constexpr_of(fwd, "PER_KEY"), c.per_key);
  EXPECT_EQ(dry.launches()[0].grid.x, cdiv(c.dv, triton::constexpr_of(fwd, "BV")));
  EXPECT_EQ(dry.launches()[0].grid.y, sequences * c.H);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{c.B, c.T, c.H, c.dv}));
  EXPECT_EQ(out[0].scalar_type(), c.dtype);
  EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{c.B, c.T, c.H}));
  // The states output has the Meta kernel's shape (the CPU kernel's), though the GPU's backward keeps none.
  const auto meta = kernel_operator<GlaForward>("seqmix::_gla_forward")
                        .call(q.to(c10::kMeta), k.to(c10::kMeta), v.to(c10::kMeta), a.to(c10::kMeta),
                              cu ? Optional(cu->to(c10::kMeta)) : Optional());
  EXPECT_EQ(out[2].sizes(), meta[2].sizes());

  const auto grads = kernel_operator<GlaBackward>("seqmix::_gla_backward")
                         .redispatch(kCudaKernel, torch::randn_like(out[0]), torch::randn_like(out[1]), q, k, v, a,
                                     out[2], cu);
  ASSERT_EQ(dry.launches().size(), 3u);
  EXPECT_STREQ(dry.launches()[1].entry->kernel, "chunk_gla_bwd_kernel");
  EXPECT_STREQ(dry.launches()[2].entry->kernel, "chunk_gla_bwd_decay_kernel");
  EXPECT_EQ(dry.launches()[2].grid.x, sequences * c.H);
  ASSERT_EQ(grads.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const at::Tensor& input = i == 0 ? q : i == 1 ? k : i == 2 ? v : a;
    EXPECT_EQ(grads[i].sizes(), input.sizes()) << "gradient " << i;
    EXPECT_EQ(grads[i].scalar_type(), c.dtype) << "gradient " << i;
  }
}

TEST(TritonDispatch, GlaScanLaunchesItsCompiledKernelsForEveryDtypeWidthDecayAndArchitecture) {
  SKIP_WITHOUT_GPU_KERNELS();
  for (int arch : {80, 90}) {
    for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      for (bool per_key : {false, true}) {
        check_gla({dtype, 2, 70, 3, 64, 64, per_key, {}}, arch);
        check_gla({dtype, 1, 17, 2, 128, 112, per_key, {}}, arch);
        check_gla({dtype, 1, 10, 2, 16, 32, per_key, {0, 3, 3, 4, 10}}, arch);
      }
    }
  }
}

// The block sizes are launch_configs()'s (src/ops/*/*_triton.py's GPU tables); a few read from them by hand.
TEST(TritonDispatch, TheEntriesCarryThePythonFilesGeometry) {
  SKIP_WITHOUT_GPU_KERNELS();
  {
    triton::DryRun dry(90);
    const auto q = torch::randn({1, 8, 1, 64}, torch::kBFloat16), beta = torch::ones({64}, torch::kBFloat16);
    kernel_operator<FemForward>("seqmix::_fem_softmax_forward")
        .redispatch(kCudaKernel, q, q, q, beta, 20.0, true, 0.125, {});
    const auto& e = *dry.launches().at(0).entry;  // GPU_BLOCKS[(bfloat16, 64)]["fwd"] = (64, 64, 8)
    EXPECT_EQ(triton::constexpr_of(e, "BLOCK_M"), 64);
    EXPECT_EQ(triton::constexpr_of(e, "BLOCK_N"), 64);
    EXPECT_EQ(e.num_warps, 8);
  }
  for (auto [arch, bv] : {std::pair<int, int64_t>{80, 32}, {90, 64}}) {
    triton::DryRun dry(arch);  // GPU_SIZES[("fwd", float16, 128, False)] = ((32, 8), (64, 8)), BT = 16
    const auto q = torch::randn({1, 8, 1, 128}, torch::kHalf), a = -torch::rand({1, 8, 1}, torch::kHalf);
    kernel_operator<GlaForward>("seqmix::_gla_forward").redispatch(kCudaKernel, q, q, q, a, {});
    const auto& e = *dry.launches().at(0).entry;
    EXPECT_EQ(triton::constexpr_of(e, "BV"), bv) << "sm_" << arch;
    EXPECT_EQ(triton::constexpr_of(e, "BT"), 16) << "sm_" << arch;
  }
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

TEST(TritonDispatch, WhatTheKernelsDoNotReadIsAClearError) {
  SKIP_WITHOUT_GPU_KERNELS();
  triton::DryRun dry(90);
  const auto fem = kernel_operator<FemForward>("seqmix::_fem_softmax_forward");
  const auto gla = kernel_operator<GlaForward>("seqmix::_gla_forward");
  const auto q64 = torch::randn({1, 4, 1, 16}, torch::kDouble);
  EXPECT_NE(error_of([&] { fem.redispatch(kCudaKernel, q64, q64, q64, torch::ones({16}, torch::kDouble), 20.0,
                                           true, 1.0, {}); })
                .find("the kernels read float32, float16 or bfloat16 (got Double); impl='naive' or 'torch'"),
            std::string::npos);
  const auto q8 = torch::randn({1, 4, 1, 8});
  EXPECT_NE(error_of([&] { fem.redispatch(kCudaKernel, q8, q8, q8, torch::ones({8}), 20.0, true, 1.0, {}); })
                .find("the head width dk must be a multiple of 16 from 16 to 128 (got 8)"),
            std::string::npos);
  const auto q = torch::randn({1, 4, 1, 16});
  EXPECT_NE(error_of([&] { fem.redispatch(kCudaKernel, q, q, q, torch::ones({16}), 41.0, true, 1.0, {}); })
                .find("needs a value cap in (0, 40] (got 41)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { gla.redispatch(kCudaKernel, q64, q64, q64, -torch::rand({1, 4, 1}, torch::kDouble), {}); })
                .find("impl='chunked' or 'naive' read float64 on a GPU"),
            std::string::npos);
  const auto wide = torch::randn({1, 2, 1, 144});
  EXPECT_NE(error_of([&] { gla.redispatch(kCudaKernel, wide, wide, wide, -torch::rand({1, 2, 1}), {}); })
                .find("the head width dk must be a multiple of 16 from 16 to 128 (got 144)"),
            std::string::npos);
  const auto many = torch::randn({2, 1, 40000, 16});
  EXPECT_NE(error_of([&] { gla.redispatch(kCudaKernel, many, many, many, -torch::rand({2, 1, 40000}), {}); })
                .find("sequences * H = 80000 exceeds the kernels' grid (65535)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { fem.redispatch(kCudaKernel, q, q, q, torch::ones({16}, c10::kMeta), 20.0, true, 1.0, {}); })
                .find("beta must be on q's device cpu (got meta)"),
            std::string::npos);
  EXPECT_TRUE(dry.launches().empty());
}

// The cubins read 16-byte aligned pointers: a view at an odd offset reaches them as an aligned copy (and the
// launcher refuses a misaligned pointer in one line).
TEST(TritonDispatch, AViewAtAnOddOffsetReachesTheKernelsAligned) {
  SKIP_WITHOUT_GPU_KERNELS();
  triton::DryRun dry(90);
  const auto flat = torch::randn({1 + 2 * 8 * 2 * 32});
  const auto q = flat.narrow(0, 1, 2 * 8 * 2 * 32).view({2, 8, 2, 32});  // contiguous, 4 bytes past alignment
  ASSERT_NE(reinterpret_cast<uintptr_t>(q.data_ptr()) % 16, 0u);
  kernel_operator<GlaForward>("seqmix::_gla_forward").redispatch(kCudaKernel, q, q, q, -torch::rand({2, 8, 2}), {});
  kernel_operator<FemForward>("seqmix::_fem_softmax_forward")
      .redispatch(kCudaKernel, q, q, q, torch::ones({64}), 20.0, true, 0.25, {});
  EXPECT_EQ(dry.launches().size(), 2u);
  const auto& entry = *dry.launches()[0].entry;
  std::vector<triton::Arg> args;
  for (int i = 0; i < entry.num_args; ++i) {
    if (entry.args[i].scratch) continue;
    const std::string type = entry.args[i].type;
    args.push_back(type == "i32" ? triton::Arg::i32(1)
                   : type == "fp32" ? triton::Arg::f32(1)
                                    : triton::Arg::pointer(q.data_ptr(), entry.args[i].type + 1));  // "*fp32"
  }
  const std::string error = error_of([&] { triton::launch(entry, 0, {1, 1, 1}, nullptr, args.data(), args.size()); });
  EXPECT_NE(error.find("is not 16-byte aligned"), std::string::npos) << error;
}

// Registered for CUDA and passed on a GPU (their files say SEQMIX_GPU_KERNEL_PASSED): auto takes the kernels there.
TEST(TritonDispatch, AutoPicksTheKernelsThatPassedOnAGpu) {
  SKIP_WITHOUT_GPU_KERNELS();
  const c10::Device meta(c10::kMeta);
  EXPECT_TRUE(ops::registered_on(ops::kGlaImpls, meta).contains(ops::Impl::fused));
  EXPECT_TRUE(ops::registered_on(ops::kFemSoftmaxReadImpls, meta).contains(ops::Impl::fused));
  EXPECT_TRUE(ops::gpu_kernel_passed("seqmix::_gla_forward"));
  EXPECT_TRUE(ops::gpu_kernel_passed("seqmix::_fem_softmax_forward"));
  EXPECT_EQ(ops::check_impl(ops::Impl::automatic, ops::kGlaImpls, "gla", meta), ops::Impl::fused);
  EXPECT_EQ(ops::check_impl(ops::Impl::automatic, ops::kLinearAttentionImpls, "linear_attention", meta),
            ops::Impl::fused);
  EXPECT_EQ(ops::check_impl(ops::Impl::automatic, ops::kFemSoftmaxReadImpls, "fem_softmax_read", meta),
            ops::Impl::fused);
}

// The kernel operators (seqmix::_*) a call reaches, as the dispatcher reports them to RecordFunction observers.
std::vector<std::string> kernel_operators_called(const std::function<void()>& call) {
  static thread_local std::vector<std::string>* called = nullptr;
  std::vector<std::string> names;
  called = &names;
  const auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::string name = fn.name();
        if (called != nullptr && name.rfind("seqmix::_", 0) == 0) called->push_back(name);
        return nullptr;
      }));
  call();
  at::removeCallback(handle);
  called = nullptr;
  return names;
}

// The kernels have passed on a GPU (their files say SEQMIX_GPU_KERNEL_PASSED), so auto takes them there, but only
// for inputs they read: other head widths go to SDPA and the chunked forms, never to an error. The meta device
// stands for a GPU.
TEST(TritonDispatch, AutoTakesPassedKernelsOnlyForInputsTheyRead) {
  SKIP_WITHOUT_GPU_KERNELS();
  const auto meta = torch::TensorOptions().device(c10::kMeta);
  for (auto [dk, takes_kernel] : {std::pair<int64_t, bool>{32, true}, {24, false}, {144, false}}) {
    SCOPED_TRACE("dk = " + std::to_string(dk));
    const auto q = torch::randn({1, 8, 2, dk}, meta), v = torch::randn({1, 8, 2, 16}, meta);
    const auto a = -torch::rand({1, 8, 2}, meta);
    const std::vector<std::string> scan{"seqmix::_gla_forward"}, read{"seqmix::_fem_softmax_forward"}, none;
    EXPECT_EQ(kernel_operators_called([&] { ops::gla(q, q, v, a, {.impl = ops::Impl::automatic}); }),
              takes_kernel ? scan : none);
    EXPECT_EQ(kernel_operators_called(
                  [&] { ops::linear_attention(q, q, v, {.causal = true, .impl = ops::Impl::automatic}); }),
              takes_kernel ? scan : none);
    // (SDPA, the fallback, has no Meta kernel for aten::where in a C++ process: Python registers it. What matters
    // is that the fused read's kernel operator was not called.)
    EXPECT_EQ(kernel_operators_called([&] {
                try {
                  ops::fem_softmax_read(q, q, v, torch::ones({32}, meta),
                                        {.cap = 20.0, .causal = true, .scale = 0.25, .impl = ops::Impl::automatic});
                } catch (const c10::Error&) {
                  if (takes_kernel) throw;
                }
              }),
              takes_kernel ? read : none);
  }
}

}  // namespace
}  // namespace seqmix

// Every mixer with an impl option computes the same function with its fused kernels as with the naive
// ops: outputs and every parameter gradient, fp64 against fp64 (tight) and fp32 fused against fp64
// naive (loose), at lengths that cross the kernels' block and chunk boundaries.
#include <gtest/gtest.h>

#include "seqmix/io/error.h"
#include "seqmix/models/registry.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

struct ImplCase {
  std::string spec;
  int64_t dim;
};
void PrintTo(const ImplCase& c, std::ostream* os) { *os << c.spec; }

struct Result {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

Result run(const ImplCase& c, const std::string& impl, torch::ScalarType type, const torch::Tensor& x,
           const torch::Tensor& dy, const torch::Tensor& mask) {
  torch::manual_seed(3);  // same seed, same parameters for both implementations
  auto m = build_mixer(c.spec + (c.spec.find(':') == std::string::npos ? ":" : ",") + "impl=" + impl,
                       MixerContext{c.dim, 256});
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters())
      if (p.dim() >= 2 && p.abs().max().item<double>() == 0) p.normal_(0, 0.3);  // FEM's zero-initialised conditioner
  }
  m->to(type);
  auto xx = x.to(type);
  auto out = mask.defined() ? m->forward_masked(xx, mask) : m->forward(xx);
  (out * dy.to(type)).sum().backward();
  Result r{out.to(torch::kDouble), {}};
  for (auto& p : m->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().to(torch::kDouble) : torch::zeros_like(p, torch::kDouble));
  return r;
}

class MixerImpls : public ::testing::TestWithParam<ImplCase> {};

TEST_P(MixerImpls, FusedEqualsNaive) {
  const auto& c = GetParam();
  for (int64_t T : {7, 130}) {
    SCOPED_TRACE("T " + std::to_string(T));
    auto g = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(T));
    auto x = torch::randn({2, T, c.dim}, g, torch::kDouble), dy = torch::randn({2, T, c.dim}, g, torch::kDouble);
    const auto naive = run(c, "naive", torch::kDouble, x, dy, {});
    const auto fused = run(c, "fused", torch::kDouble, x, dy, {});
    const auto fused32 = run(c, "fused", torch::kFloat, x, dy, {});
    EXPECT_TRUE(testing::assert_close(fused.out, naive.out, 1e-9, 1e-11)) << "output fp64";
    EXPECT_TRUE(testing::assert_close(fused32.out, naive.out, 2e-3, 2e-4)) << "output fp32";
    ASSERT_EQ(fused.grads.size(), naive.grads.size());
    for (size_t i = 0; i < naive.grads.size(); ++i) {
      EXPECT_TRUE(testing::assert_close(fused.grads[i], naive.grads[i], 1e-8, 1e-10)) << "gradient " << i << " fp64";
      EXPECT_TRUE(testing::assert_close(fused32.grads[i], naive.grads[i], 5e-3, 1e-3)) << "gradient " << i << " fp32";
    }
  }
}

std::string test_name(const ::testing::TestParamInfo<ImplCase>& info) {
  std::string n = info.param.spec;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// FEM takes padding masks (positions count real tokens, padded keys leave the support).
class FemImpls : public ::testing::TestWithParam<ImplCase> {};

TEST_P(FemImpls, FusedEqualsNaiveWithPadding) {
  const auto& c = GetParam();
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  auto x = torch::randn({2, 80, c.dim}, g, torch::kDouble), dy = torch::randn({2, 80, c.dim}, g, torch::kDouble);
  auto mask = torch::ones({2, 80}, torch::kBool);
  mask.index_put_({0, torch::indexing::Slice(0, 70)}, false);
  const auto naive = run(c, "naive", torch::kDouble, x, dy, mask);
  const auto fused = run(c, "fused", torch::kDouble, x, dy, mask);
  EXPECT_TRUE(testing::assert_close(fused.out, naive.out, 1e-9, 1e-11));
  for (size_t i = 0; i < naive.grads.size(); ++i)
    EXPECT_TRUE(testing::assert_close(fused.grads[i], naive.grads[i], 1e-8, 1e-10)) << "gradient " << i;
}

INSTANTIATE_TEST_SUITE_P(Registry, MixerImpls,
                         ::testing::Values(ImplCase{"softmax", 16}, ImplCase{"softmax:causal=0,heads=2", 12},
                                           ImplCase{"linear", 16}, ImplCase{"linear:causal=0", 16},
                                           ImplCase{"ela", 16}, ImplCase{"ela:causal=0", 16},
                                           ImplCase{"ela:kernel=sub_sq_euclidean", 16},
                                           ImplCase{"ela:kernel=direction_magnitude,causal=0", 16},
                                           ImplCase{"gla", 16}, ImplCase{"gla:per_key=1,heads=2", 16}, ImplCase{"ssm:state=3", 8}, ImplCase{"fem", 16},
                                           ImplCase{"fem:causal=0", 16}, ImplCase{"fem:flags=CLG", 16},
                                           ImplCase{"fem:prior=linear", 16}, ImplCase{"fem:prior=gla", 16},
                                           ImplCase{"fem:prior=aft", 16}, ImplCase{"fem:prior=lrnn_decay", 16},
                                           ImplCase{"fem:prior=ssm,ssm_state=3", 16}),
                         test_name);

INSTANTIATE_TEST_SUITE_P(Priors, FemImpls,
                         ::testing::Values(ImplCase{"fem", 16}, ImplCase{"fem:causal=0", 16},
                                           ImplCase{"fem:prior=linear", 16}, ImplCase{"fem:prior=gla", 16},
                                           ImplCase{"fem:prior=aft", 16}, ImplCase{"fem:prior=lrnn_decay", 16},
                                           ImplCase{"fem:prior=ssm,ssm_state=3", 16}),
                         test_name);

// The softmax mixer on PyTorch's own kernel (impl=torch) is the same layer: output and every parameter gradient.
TEST(MixerImpls, SoftmaxOnTorchsKernelEqualsNaive) {
  for (const ImplCase& c : {ImplCase{"softmax", 16}, ImplCase{"softmax:causal=0,heads=2", 12}}) {
    SCOPED_TRACE(c.spec);
    auto g = at::make_generator<at::CPUGeneratorImpl>(11);
    auto x = torch::randn({2, 130, c.dim}, g, torch::kDouble), dy = torch::randn({2, 130, c.dim}, g, torch::kDouble);
    const auto naive = run(c, "naive", torch::kDouble, x, dy, {});
    const auto torch_kernel = run(c, "torch", torch::kDouble, x, dy, {});
    EXPECT_TRUE(testing::assert_close(torch_kernel.out, naive.out, 1e-9, 1e-11));
    ASSERT_EQ(torch_kernel.grads.size(), naive.grads.size());
    for (size_t i = 0; i < naive.grads.size(); ++i)
      EXPECT_TRUE(testing::assert_close(torch_kernel.grads[i], naive.grads[i], 1e-8, 1e-10)) << "gradient " << i;
  }
  EXPECT_THROW(build_mixer("gla:impl=torch", MixerContext{16, 64}), Error);  // PyTorch has no GLA kernel
}

TEST(MixerImpls, FusedFemNeedsACap) {
  EXPECT_THROW(build_mixer("fem:cap=0,impl=fused", MixerContext{16, 64}), Error);
  EXPECT_NO_THROW(build_mixer("fem:cap=0", MixerContext{16, 64}));  // streams exact running maxima
  EXPECT_NO_THROW(build_mixer("fem:cap=0,impl=naive", MixerContext{16, 64}));
  EXPECT_THROW(build_mixer("softmax:impl=flash", MixerContext{16, 64}), Error);
  EXPECT_THROW(build_mixer("fem:cap=42", MixerContext{16, 64}), Error);  // beyond the fused read's float32 bounds
  EXPECT_NO_THROW(build_mixer("fem:cap=42,impl=naive", MixerContext{16, 64}));
  EXPECT_NO_THROW(build_mixer("fem:cap=42,prior=gla", MixerContext{16, 64}));
}

}  // namespace
}  // namespace seqmix

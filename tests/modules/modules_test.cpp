#include <gtest/gtest.h>

#include "seqmix/modules/causal_conv.h"
#include "seqmix/modules/channel_mixer.h"
#include "seqmix/modules/norm.h"
#include "seqmix/modules/rotary.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

TEST(Rotary, IsARotationWithRelativePhase) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(1);
  auto q = torch::randn({1, 1, 1, 8}, g, torch::kDouble), k = torch::randn({1, 1, 1, 8}, g, torch::kDouble);
  // Norm preserved at any position.
  for (int64_t pos : {0, 5, 1000})
    EXPECT_NEAR(apply_rotary(q, pos).norm().item<double>(), q.norm().item<double>(), 1e-12);
  // q at position s+d against k at position s depends on d only.
  const double d3 = (apply_rotary(q, 3) * apply_rotary(k, 0)).sum().item<double>();
  for (int64_t s : {1, 7, 50})
    EXPECT_NEAR((apply_rotary(q, s + 3) * apply_rotary(k, s)).sum().item<double>(), d3, 1e-10);
  // Position 0 is the identity; channel i pairs with i + d/2.
  EXPECT_CLOSE(apply_rotary(q, 0), q, 0, 0);
  auto e0 = torch::zeros({1, 1, 1, 8}, torch::kDouble);
  e0.index_put_({0, 0, 0, 0}, 1.0);
  auto r = apply_rotary(e0, 1);
  EXPECT_NEAR(r[0][0][0][0].item<double>(), std::cos(1.0), 1e-12);
  EXPECT_NEAR(r[0][0][0][4].item<double>(), std::sin(1.0), 1e-12);
  // A sequence of T positions equals T single-position calls with offsets.
  auto x = torch::randn({2, 5, 3, 8}, g, torch::kDouble);
  auto full = apply_rotary(x, 2);
  for (int64_t t = 0; t < 5; ++t) EXPECT_CLOSE(full.select(1, t), apply_rotary(x.narrow(1, t, 1), 2 + t).squeeze(1), 1e-14, 1e-14);
  EXPECT_THROW(apply_rotary(torch::zeros({1, 2, 1, 5}), 0), c10::Error);
}

TEST(Norms, RmsAndLayerNormMatchTheirFormulas) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(2);
  auto x = torch::randn({3, 4, 6}, g, torch::kDouble);
  auto rms = make_norm("rms", 6);
  rms->to(torch::kDouble);
  EXPECT_CLOSE(rms->forward(x), x / (x.square().mean(-1, true) + 1e-5).sqrt(), 1e-12, 1e-14);
  auto ln = make_norm("layer", 6);
  ln->to(torch::kDouble);
  auto mean = x.mean(-1, true);
  auto var = (x - mean).square().mean(-1, true);
  EXPECT_CLOSE(ln->forward(x), (x - mean) / (var + 1e-5).sqrt(), 1e-10, 1e-12);
  EXPECT_THROW(make_norm("batch", 6), std::exception);
}

TEST(CausalConv, StepEqualsForwardAndIsCausal) {
  CausalDepthwiseConv conv(5, 4, 0.5);
  conv->to(torch::kDouble);
  auto g = at::make_generator<at::CPUGeneratorImpl>(3);
  auto x = torch::randn({2, 9, 5}, g, torch::kDouble);
  auto y = conv->forward(x);
  // Explicit sum y_t = sum_j w[:, j] x_{t-3+j}.
  auto w = conv->weight;
  for (int64_t t = 0; t < 9; ++t) {
    auto expect = torch::zeros({2, 5}, torch::kDouble);
    for (int64_t j = 0; j < 4; ++j)
      if (t - 3 + j >= 0) expect += w.select(1, j) * x.select(1, t - 3 + j);
    EXPECT_CLOSE(y.select(1, t), expect, 1e-12, 1e-14);
  }
  auto window = conv->initial_window(2);
  for (int64_t t = 0; t < 9; ++t) EXPECT_CLOSE(conv->step(x.select(1, t), window), y.select(1, t), 1e-12, 1e-14);
}

TEST(ChannelMixers, ShapesAndSwigluWidth) {
  EXPECT_EQ(swiglu_default_hidden(128), 352);  // MAD's 2*4*128/3 rounded up to 16
  SwiGLUImpl swiglu(16, 40);
  MLPImpl mlp(16, 64, true);
  auto x = torch::randn({2, 3, 16});
  EXPECT_EQ(swiglu.forward(x).sizes(), x.sizes());
  EXPECT_EQ(mlp.forward(x).sizes(), x.sizes());
  EXPECT_CLOSE(swiglu.forward(x), swiglu.w3(torch::silu(swiglu.w1(x)) * swiglu.w2(x)), 1e-6, 1e-7);
  EXPECT_CLOSE(mlp.forward(x), mlp.fc2(torch::gelu(mlp.fc1(x))), 1e-6, 1e-7);
}

}  // namespace
}  // namespace seqmix

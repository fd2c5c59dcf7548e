#include "seqmix/layers/hypermlp.h"

#include <torch/torch.h>

#include <cmath>

#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"

namespace seqmix {
namespace {

constexpr int64_t kConvKernel = 4;  // the paper's depthwise conv on the K and V inputs
constexpr double kInitStd = 0.02;   // every weight, the DPLR factors included (paper App. L)

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  init_linear(l, kInitStd);
  return l;
}

}  // namespace

HyperMlpImpl::HyperMlpImpl(std::string kind, const HyperMlpOptions& options)
    : MixerImpl(std::move(kind), options.dim, /*causal=*/true), options_(options) {
  const HyperVariant& v = options.variant;
  const HyperShape shape{options.dim, options.heads, options.mix_rank, options.max_len, options.bias};
  ranks_ = resolve_hyper_ranks(this->kind(), v, shape, options.qk_rank, options.vo_rank);
  score_heads_ = options.heads * v.score_heads_per_head();
  if (options.block < 0) throw Error("mixer " + this->kind() + ": block must be >= 0 (0 = one block)");

  wq = register_module("wq", linear(options.dim, ranks_.qk_rank, options.bias));
  wk = register_module("wk", linear(options.dim, ranks_.qk_rank, options.bias));
  wv = register_module("wv", linear(options.dim, ranks_.vo_rank, options.bias));
  wo = register_module("wo", linear(ranks_.vo_rank, options.dim, options.bias));
  if (v.gates) {
    qk_gate = register_module("qk_gate", linear(options.dim, ranks_.qk_rank, true));
    vo_gate = register_module("vo_gate", linear(options.dim, ranks_.vo_rank, true));
  }
  if (v.conv) {
    conv_k = register_module("conv_k", CausalDepthwiseConv(options.dim, kConvKernel, kInitStd));
    conv_v = register_module("conv_v", CausalDepthwiseConv(options.dim, kConvKernel, kInitStd));
  }
  auto make_mixing = [&](const std::string& name, int64_t heads) {
    const int64_t L = options.max_len, r = options.mix_rank;
    ops::HyperMixing m;
    m.diag = register_parameter(name + "_diag", torch::zeros({heads, L}));
    m.U = register_parameter(name + "_U", torch::randn({heads, L, r}) * kInitStd);
    m.Vt = register_parameter(name + "_Vt", torch::randn({heads, r, L}) * kInitStd);
    return m;
  };
  if (v.mix_before) {
    control1 = register_module("control1", linear(options.dim, score_heads_ * options.mix_rank, true));
    mix1 = make_mixing("mix1", score_heads_);
  }
  if (v.mix_after) {
    control2 = register_module("control2", linear(options.dim, options.heads * options.mix_rank, true));
    mix2 = make_mixing("mix2", options.heads);
  }
  read_options_.activation = v.base == 'S'   ? ops::HyperActivation::softmax
                             : v.base == 'G' ? ops::HyperActivation::glu
                                             : ops::HyperActivation::relu;
  read_options_.layout = v.lag ? ops::HyperLayout::lag : ops::HyperLayout::forward;
  read_options_.eps = options.eps;
  read_options_.block = options.block;
  read_options_.scale = v.base == 'S' ? 1.0 / std::sqrt(double(ranks_.qk_rank / score_heads_)) : 1.0;
}

void HyperMlpImpl::check_length(int64_t positions) const {
  if (options_.variant.mixes() && positions > options_.max_len)
    throw Error("mixer " + kind() + ": position " + std::to_string(positions - 1) + " is beyond max_len=" +
                std::to_string(options_.max_len) + " (the sequence-mixing parameters are stored per position)");
}

HyperMlpImpl::Projected HyperMlpImpl::project(const torch::Tensor& x, const torch::Tensor& xk,
                                              const torch::Tensor& xv, int64_t offset) {
  const HyperVariant& v = options_.variant;
  Projected p;
  p.q = split_heads(wq(x), score_heads_);
  p.k = split_heads(wk(xk), score_heads_);
  p.v = split_heads(wv(xv), options_.heads);
  if (v.rope) {  // RoPE before the gate; k is not gated
    p.q = apply_rotary(p.q, offset, options_.rope_theta);
    p.k = apply_rotary(p.k, offset, options_.rope_theta);
  }
  if (v.gates) p.q = p.q * split_heads(torch::sigmoid(qk_gate(x)), score_heads_);
  if (v.mix_before) p.s1 = split_heads(torch::sigmoid(control1(x)), score_heads_);
  if (v.mix_after) p.s2 = split_heads(torch::sigmoid(control2(x)), options_.heads);
  return p;
}

torch::Tensor HyperMlpImpl::read(const Projected& p, const torch::Tensor& k, const torch::Tensor& v) {
  return ops::hypermlp_read(p.q, k, v, p.s1, mix1, p.s2, mix2, read_options_,
                            options_.dense ? ops::Impl::naive : ops::Impl::fused);
}

torch::Tensor HyperMlpImpl::output(const torch::Tensor& read, const torch::Tensor& x) {
  auto r = options_.variant.gates ? read * split_heads(torch::sigmoid(vo_gate(x)), options_.heads) : read;
  return wo(merge_heads(r));
}

torch::Tensor HyperMlpImpl::forward(const torch::Tensor& x) {
  check_input(x);
  check_length(x.size(1));
  const bool conv = options_.variant.conv;
  auto p = project(x, conv ? conv_k(x) : x, conv ? conv_v(x) : x, 0);
  return output(read(p, p.k, p.v), x);
}

namespace {
struct HyperMlpState {
  torch::Tensor k, v;  // the cache [B,S,Hs,rq], [B,S,H,rv]
  torch::Tensor conv;  // the last K-1 raw inputs (labels with c)
};
}  // namespace

DecodeState HyperMlpImpl::init_state(int64_t batch) const {
  const auto opts = wq->weight.options();
  HyperMlpState s{torch::zeros({batch, 0, score_heads_, ranks_.qk_rank / score_heads_}, opts),
                  torch::zeros({batch, 0, options_.heads, ranks_.vo_rank / options_.heads}, opts), {}};
  if (options_.variant.conv) s.conv = conv_k->initial_window(batch);
  return DecodeState::of(std::move(s));
}

torch::Tensor HyperMlpImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  check_length(state.position + x.size(1));
  auto& s = state.as<HyperMlpState>(kind());
  torch::Tensor xk = x, xv = x;
  if (options_.variant.conv) {
    // The convs see the previous K-1 inputs: run them on [window, x] and keep the outputs of x.
    auto full = torch::cat({s.conv, x}, 1);
    xk = conv_k(full).narrow(1, kConvKernel - 1, x.size(1));
    xv = conv_v(full).narrow(1, kConvKernel - 1, x.size(1));
    s.conv = full.narrow(1, full.size(1) - (kConvKernel - 1), kConvKernel - 1);
  }
  auto p = project(x, xk, xv, state.position);
  s.k = torch::cat({s.k, p.k}, 1);
  s.v = torch::cat({s.v, p.v}, 1);
  state.position += x.size(1);
  return output(read(p, s.k, s.v), x);
}

torch::Tensor HyperMlpImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return prefill(x_t.unsqueeze(1), state).squeeze(1);
}

}  // namespace seqmix

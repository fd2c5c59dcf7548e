#pragma once
// HyperMLP / HyperGLU (one layer, any Table 1 label): each head is a dynamic two-layer MLP over the context,
//   q = (RoPE(x W_q)) * M1(x),  k = conv_k(x) W_k (RoPE),  v = conv_v(x) W_v,
//   read = hypermlp_read(q, k, v; R1, act, R2)  (ops/hypermlp.h),  y = (read * M2(x)) W_o,
// with M1, M2 = sigmoid(x W + b) (g), the DPLR controls s1, s2 = sigmoid(x W + b) (1, 2) and the parameters
// p, U, Vt of the mixers stored for max_len positions. Decoding keeps the K/V cache and the last 3 inputs of
// the convs; each step is the read of one query row against the cache.
#include <torch/nn/modules/linear.h>

#include "seqmix/layers/hypermlp_variant.h"
#include "seqmix/layers/mixer.h"
#include "seqmix/modules/causal_conv.h"
#include "seqmix/ops/hypermlp.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct HyperMlpOptions {
  int64_t dim = 128;
  HyperVariant variant = HyperVariant::parse("R-cg-q-12o");
  int64_t heads = 2;
  int64_t mix_rank = 0;           // r_s; 0 = the paper's 16, or the largest that fits (resolve_hyper_ranks)
  int64_t max_len = 0;            // positions the mixing parameters cover
  int64_t qk_rank = 0, vo_rank = 0;  // 0 = from the label
  int64_t block = 256;            // query rows per block of the blocked read (0 = one block)
  double rope_theta = 10000.0;
  double eps = 1e-12;
  bool bias = false;              // on W_q, W_k, W_v, W_o
  bool dense = false;             // the dense (naive, O(T^3)) read instead of the blocked one
};

class HyperMlpImpl : public MixerImpl {
 public:
  HyperMlpImpl(std::string kind, const HyperMlpOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;
  torch::Tensor prefill(const torch::Tensor& x, DecodeState& state) override;
  // The kind, label, ranks and parameter count against softmax attention's budget (what mix_rank=0 chose).
  void pretty_print(std::ostream& stream) const override;

  const HyperMlpOptions& options() const { return options_; }
  const HyperRanks& ranks() const { return ranks_; }
  int64_t score_heads() const { return score_heads_; }

  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  torch::nn::Linear qk_gate{nullptr}, vo_gate{nullptr};     // M1, M2 (g)
  torch::nn::Linear control1{nullptr}, control2{nullptr};   // s1, s2 (1, 2)
  CausalDepthwiseConv conv_k{nullptr}, conv_v{nullptr};     // (c)
  ops::HyperMixing mix1, mix2;                              // R1, R2 parameters (1, 2)

 private:
  struct Projected {
    torch::Tensor q, k, v, s1, s2;  // [B,T,heads,width]
  };
  // x [B,T,D]; xk, xv the (conv'd) inputs of W_k and W_v; offset the position of x's first token.
  Projected project(const torch::Tensor& x, const torch::Tensor& xk, const torch::Tensor& xv, int64_t offset);
  torch::Tensor read(const Projected& p, const torch::Tensor& k, const torch::Tensor& v);
  torch::Tensor output(const torch::Tensor& read, const torch::Tensor& x);
  void check_length(int64_t positions) const;

  HyperMlpOptions options_;
  HyperRanks ranks_;
  int64_t score_heads_;
  ops::HyperReadOptions read_options_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& hypermlp_mixer_declaration();
const MixerDeclaration& hyperglu_mixer_declaration();

}  // namespace seqmix

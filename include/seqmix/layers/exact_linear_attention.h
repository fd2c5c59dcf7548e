#pragma once
// The ELA attention block of ELA-GPT: q, k, v projections without bias, RoPE on q and k, Exact Linear
// Attention per head under the chosen kernel, output projection without bias. With heads = 1, rope = 0
// and output = false it is the Memory Lobe's read (the Hyper-Link residual builds it so).
#include <torch/nn/modules/linear.h>

#include <string>

#include "seqmix/layers/mixer.h"
#include "seqmix/ops/impl.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix::ops {
struct ExactKernel;
}

namespace seqmix {

struct ExactLinearAttentionOptions {
  ops::Impl impl = ops::Impl::automatic;  // auto (per device), the linear form, or the explicit quadratic form (naive twin)
  int64_t dim = 128;
  int64_t heads = 4;
  std::string kernel = "hadamard_exp";  // any name of ops::exact_kernel_names()
  bool causal = true;
  bool rope = true;
  double rope_theta = 10000.0;
  double scale = 1.0;  // q and k are multiplied by it before the kernel (1: the authors' ELA-GPT)
  bool bias = false;
  bool output = true;  // output projection
  double eps = 1e-8;   // row-sum floor (the authors' clamp)
  std::string name = "ela";
};

class ExactLinearAttentionImpl : public MixerImpl {
 public:
  explicit ExactLinearAttentionImpl(const ExactLinearAttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;

  const ExactLinearAttentionOptions& options() const { return options_; }

  torch::nn::Linear qkv{nullptr}, out{nullptr};

 private:
  struct Projected {
    torch::Tensor q, k, v;
  };
  Projected project(const torch::Tensor& x, int64_t offset);
  torch::Tensor finish(const torch::Tensor& y);  // [B,T,H,dh] -> [B,T,D]

  ExactLinearAttentionOptions options_;
  const ops::ExactKernel* kernel_ = nullptr;  // an entry of the kernel table (entries are never removed)
  int64_t head_dim_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& ela_mixer_declaration();

}  // namespace seqmix

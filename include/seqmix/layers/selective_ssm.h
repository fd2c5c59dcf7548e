#pragma once
// Diagonal selective SSM mixer (Mamba-style): in-projection to E = expand*D channels and a gate z,
// short causal conv + SiLU, input-dependent step size delta = softplus(.), A = -exp(A_log),
// non-negative B_t, C_t = softplus(.) (positive impulse response), y = scan(u) + D*u, out = W_o(y * SiLU(z)).
#include <torch/nn/modules/linear.h>

#include "seqmix/ops/impl.h"
#include "seqmix/layers/mixer.h"
#include "seqmix/modules/causal_conv.h"
#include "seqmix/layers/mixer_spec.h"

namespace seqmix {

struct SelectiveSSMOptions {
  ops::Impl impl = ops::Impl::automatic;  // auto (per device), the fused kernel, or its naive twin
  int64_t dim = 128;
  int64_t expand = 2;
  int64_t state = 16;    // N, the state size per channel
  int64_t conv = 4;      // kernel of the short causal conv; 0 disables it
  int64_t dt_rank = 0;   // rank of the step-size projection; 0 means ceil(dim / 16)
  double dt_min = 1e-3;  // initial step sizes are log-uniform in [dt_min, dt_max]
  double dt_max = 0.1;
};

class SelectiveSSMImpl : public MixerImpl {
 public:
  explicit SelectiveSSMImpl(const SelectiveSSMOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;

  torch::nn::Linear in_proj{nullptr}, x_proj{nullptr}, dt_proj{nullptr}, out_proj{nullptr};
  CausalDepthwiseConv conv{nullptr};
  torch::Tensor A_log, D_skip;  // [E,N], [E]

 private:
  struct Selective {
    torch::Tensor u, z, delta, b, c;  // u, z, delta [...,E]; b, c [...,N]
  };
  // From the conv'd input u [...,E] and gate z [...,E].
  Selective select(torch::Tensor u, torch::Tensor z);
  torch::Tensor finish(const Selective& s, const torch::Tensor& y);
  SelectiveSSMOptions options_;
  int64_t inner_, dt_rank_;
};

// The mixer's declaration for the registry (options, defaults, checks): beside the layer, in its .cpp.
const MixerDeclaration& ssm_mixer_declaration();

}  // namespace seqmix

#include "seqmix/models/residual.h"

#include <torch/torch.h>

namespace seqmix {

torch::Tensor PreNormResidualImpl::forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) {
  auto z = x;
  for (const auto& block : blocks) {
    z = z + block.mixer(z);
    if (block.channel) z = z + block.channel(z);
  }
  return z;
}

torch::Tensor HyperLinkResidualImpl::forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) {
  auto z = x;
  for (const auto& block : blocks) {
    auto a = block.mixer(z);
    auto flow = a;  // the transformation flow F = x_next - x (before the lobe)
    if (block.raw_channel) flow = attention_skip_ ? a + block.raw_channel(a) : block.raw_channel(a);
    z = block.lobe ? z + flow + block.lobe(flow) : z + flow;
  }
  return z;
}

MomentumResidualImpl::MomentumResidualImpl(const MomentumResidualOptions& options, int64_t blocks,
                                           int64_t sublayers_per_block)
    : options_(options) {
  const int64_t groups = options.sharing == MomentumResidualOptions::Sharing::sublayer ? blocks * sublayers_per_block
                         : options.sharing == MomentumResidualOptions::Sharing::layer ? blocks
                                                                                        : 1;
  beta = torch::full({groups}, options.beta);
  eta = torch::full({groups}, options.eta);
  if (options.learnable) {
    beta = register_parameter("beta", beta);
    eta = register_parameter("eta", eta);
  } else {
    beta = register_buffer("beta", beta);
    eta = register_buffer("eta", eta);
  }
}

int64_t MomentumResidualImpl::group_of(int64_t block, int64_t sublayer_index) const {
  switch (options_.sharing) {
    case MomentumResidualOptions::Sharing::sublayer: return sublayer_index;
    case MomentumResidualOptions::Sharing::layer: return block;
    case MomentumResidualOptions::Sharing::global: return 0;
  }
  return 0;
}

torch::Tensor MomentumResidualImpl::forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) {
  auto z = x;
  auto m = torch::zeros_like(x);
  int64_t index = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const auto& block = blocks[b];
    auto update = [&](const Sublayer& pre, const Sublayer& raw, const Sublayer& norm) {
      const int64_t g = group_of(static_cast<int64_t>(b), index++);
      auto beta_g = beta.select(0, g), eta_g = eta.select(0, g);
      auto input = options_.nesterov ? z + beta_g * m : z;  // the look-ahead point
      m = beta_g * m + (options_.post_norm ? raw(input) : pre(input));
      z = z + eta_g * m;
      if (options_.post_norm) z = norm(z);
    };
    update(block.mixer, block.raw_mixer, block.mixer_norm);
    if (block.channel) update(block.channel, block.raw_channel, block.channel_norm);
  }
  return z;
}

}  // namespace seqmix

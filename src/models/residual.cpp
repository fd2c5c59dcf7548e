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

}  // namespace seqmix

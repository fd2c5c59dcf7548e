#include "seqmix/modules/init.h"

#include <torch/torch.h>

namespace seqmix {

void init_linear(const torch::nn::Linear& linear, double std) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std);
  if (linear->bias.defined()) linear->bias.zero_();
}

}  // namespace seqmix

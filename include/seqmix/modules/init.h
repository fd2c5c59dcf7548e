#pragma once
// Parameter initialisation shared by every layer: the papers' N(0, 0.02) weights and zero biases.
#include <torch/nn/modules/linear.h>

namespace seqmix {

void init_linear(const torch::nn::Linear& linear, double std = 0.02);

}  // namespace seqmix

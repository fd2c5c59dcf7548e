#pragma once
// AdamW with two weight-decay groups: matrices (dim >= 2) decay, vectors (norm weights, biases,
// per-channel scalars) do not.
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <memory>

namespace seqmix {

struct OptimizerConfig {
  double lr = 3e-3;  // the defaults are the run config's (TrainConfig)
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decay_vectors = false;  // also decay norm weights and biases (MAD's single parameter group)
};

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& config);
void set_learning_rate(torch::optim::AdamW& optimizer, double lr);

}  // namespace seqmix

#include "seqmix/train/optimizer.h"

#include <torch/torch.h>

namespace seqmix {

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& c) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model.parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 || c.decay_vectors ? decay : no_decay).push_back(p);
  }
  auto options = [&c](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(c.lr)
                                                            .betas({c.beta1, c.beta2})
                                                            .eps(c.eps)
                                                            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(c.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(c.lr));
}

void set_learning_rate(torch::optim::AdamW& optimizer, double lr) {
  for (auto& group : optimizer.param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

}  // namespace seqmix

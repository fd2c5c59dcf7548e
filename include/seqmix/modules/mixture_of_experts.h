#pragma once
// Mixture of SwiGLU experts with top-k routing, the Switch load-balance loss, and the ELA paper's expert
// label vectors used as the expert's output bias (eqs 14/15):
//   none:  y = sum_{e in TopK} s_e E_e(x)
//   outer: y = sum_{e in TopK} [ s_e E_e(x) + l_e ]      dy/dl_e = I
//   inner: y = sum_{e in TopK} s_e ( E_e(x) + l_e )      dy/dl_e = s_e I (the gradient runs through s_e)
// s_e are the top-k router probabilities renormalised to sum to 1 (with top_k = 1, the raw probability). The label l_e is row e of the router
// weight (the same vector keys the routing and biases the output) or, with label_source = separate, a
// parameter of its own.
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "seqmix/modules/channel_mixer.h"

namespace seqmix {

struct MixtureOfExpertsOptions {
  int64_t dim = 128;
  int64_t experts = 4;
  int64_t top_k = 2;
  int64_t hidden = 0;  // expert hidden width (0 = width, as the authors' d -> 2d gate/value split)
  enum class Label { none, outer, inner } label = Label::outer;
  bool label_from_router = true;
  double aux_weight = 0.01;  // coefficient of the load-balance loss
  bool skip = false;         // y = x + moe(x): the authors' internal skip
};

// The routing of N tokens: probs [N,E] (softmax of the router logits), the top-k experts indices [N,k]
// and their weights [N,k] (renormalised for k > 1).
struct Routing {
  torch::Tensor probs, indices, weights;
};

// Switch load-balance loss E * sum_e f_e P_e, with f_e the fraction of the N*k assignments that went
// to expert e and P_e the mean router probability of e. It is 1 for a uniform load and grows with
// imbalance.
torch::Tensor load_balance_loss(const torch::Tensor& probs, const torch::Tensor& indices, int64_t experts);

class MixtureOfExpertsImpl : public ChannelMixerImpl {
 public:
  explicit MixtureOfExpertsImpl(const MixtureOfExpertsOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;  // [..., D] -> [..., D]
  // aux_weight * load_balance_loss of the last forward.
  torch::Tensor auxiliary_loss() const override { return last_aux_loss_; }

  Routing route(const torch::Tensor& tokens) const;  // tokens [N,D]
  torch::Tensor labels() const;                      // [E,D]

  torch::nn::Linear router{nullptr};
  torch::nn::ModuleList experts{nullptr};
  torch::Tensor label_weight;  // [E,D], only with label_from_router = false

 private:
  MixtureOfExpertsOptions options_;
  std::vector<std::shared_ptr<ChannelMixerImpl>> expert_list_;
  torch::Tensor last_aux_loss_;
};

}  // namespace seqmix

#include "seqmix/modules/mixture_of_experts.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/init.h"

namespace seqmix {

torch::Tensor load_balance_loss(const torch::Tensor& probs, const torch::Tensor& indices, int64_t experts) {
  TORCH_CHECK(probs.dim() == 2 && probs.size(1) == experts, "load_balance_loss: probs must be [N,", experts,
              "] (got ", probs.sizes(), ")");
  TORCH_CHECK(indices.dim() == 2 && indices.size(0) == probs.size(0), "load_balance_loss: indices must be [N,k] (got ",
              indices.sizes(), ")");
  if (probs.size(0) == 0) return torch::zeros({}, probs.options());  // no tokens routed: nothing to balance
  auto counts = torch::zeros({experts}, probs.options());
  counts.index_add_(0, indices.reshape(-1), torch::ones({indices.numel()}, probs.options()));
  auto fraction = counts / static_cast<double>(std::max<int64_t>(1, indices.numel()));  // f_e, no gradient
  return static_cast<double>(experts) * (fraction * probs.mean(0)).sum();
}

MixtureOfExpertsImpl::MixtureOfExpertsImpl(const MixtureOfExpertsOptions& o) : options_(o) {
  if (o.experts < 1) throw Error("channel mixer moe: experts must be at least 1");
  if (o.top_k < 1 || o.top_k > o.experts)
    throw Error("channel mixer moe: top_k=" + std::to_string(o.top_k) + " must lie in [1, experts=" +
                std::to_string(o.experts) + "]");
  router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(o.dim, o.experts).bias(true)));
  init_linear(router);
  experts = register_module("experts", torch::nn::ModuleList());
  const int64_t hidden = o.hidden > 0 ? o.hidden : o.dim;
  for (int64_t e = 0; e < o.experts; ++e) {
    auto expert = std::make_shared<SwiGLUImpl>(o.dim, hidden);
    experts->push_back(expert);
    expert_list_.push_back(expert);
  }
  if (o.label != MixtureOfExpertsOptions::Label::none && !o.label_from_router) {
    label_weight = register_parameter("label", torch::empty({o.experts, o.dim}));
    torch::NoGradGuard no_grad;
    label_weight.normal_(0.0, 0.02);
  }
}

Routing MixtureOfExpertsImpl::route(const torch::Tensor& tokens) const {
  // In float32 at least, autocast off (Switch Transformer's selective precision): a top-k choice made on logits
  // rounded to bfloat16 flips at near ties, and the probabilities feed the balance loss.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto type = torch::promote_types(tokens.scalar_type(), torch::kFloat);
  Routing r;
  r.probs = torch::softmax(
      torch::nn::functional::linear(tokens.to(type), router->weight.to(type), router->bias.to(type)), -1);
  auto top = r.probs.topk(options_.top_k, -1);
  r.indices = std::get<1>(top);
  // Top-2 and up: renormalised to sum to 1 (the authors' code). Top-1 keeps the raw probability
  // (Switch): renormalised it would be ~1 with a vanishing gradient, and the router would learn from the
  // balance loss alone.
  r.weights = options_.top_k == 1 ? std::get<0>(top) : std::get<0>(top) / (std::get<0>(top).sum(-1, true) + 1e-8);
  return r;
}

torch::Tensor MixtureOfExpertsImpl::labels() const {
  return options_.label_from_router ? router->weight : label_weight;
}

torch::Tensor MixtureOfExpertsImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.dim, "channel mixer moe: input must be [..., ", options_.dim,
              "] (got ", x.sizes(), ")");
  auto tokens = x.reshape({-1, options_.dim});
  const Routing routing = route(tokens);
  auto y = torch::zeros_like(tokens);
  using Label = MixtureOfExpertsOptions::Label;
  for (int64_t e = 0; e < options_.experts; ++e) {
    auto hit = routing.indices == e;                          // [N,k]
    auto rows = hit.any(-1).nonzero().squeeze(-1);            // tokens routed to e
    if (rows.numel() == 0) continue;
    auto score = (routing.weights * hit).sum(-1).index_select(0, rows).unsqueeze(-1);  // s_e [n,1]
    auto out = expert_list_[static_cast<size_t>(e)]->forward(tokens.index_select(0, rows));
    torch::Tensor contribution;
    if (options_.label == Label::outer) contribution = score * out + labels()[e];
    else if (options_.label == Label::inner) contribution = score * (out + labels()[e]);
    else contribution = score * out;
    y = y.index_add(0, rows, contribution.to(y.scalar_type()));
  }
  last_aux_loss_ = options_.aux_weight * load_balance_loss(routing.probs, routing.indices, options_.experts);
  if (options_.skip) y = y + tokens;
  return y.view(x.sizes());
}

}  // namespace seqmix

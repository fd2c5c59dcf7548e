// The list of priors: one line per prior, in the order `seqmix list` shows FEM's prior= choices. A prior's code
// is its own file (softmax.cpp, linear.cpp, ...).
#include "prior.h"
#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"

namespace seqmix {

Prior make_softmax_prior(const PriorConfig&, torch::nn::Module&);
Prior make_linear_prior(const PriorConfig&, torch::nn::Module&);
Prior make_gla_prior(const PriorConfig&, torch::nn::Module&);
Prior make_aft_prior(const PriorConfig&, torch::nn::Module&);
Prior make_lrnn_decay_prior(const PriorConfig&, torch::nn::Module&);
Prior make_ssm_prior(const PriorConfig&, torch::nn::Module&);
Prior make_delta_prior(const PriorConfig&, torch::nn::Module&);

const std::vector<PriorDeclaration>& prior_declarations() {
  static const std::vector<PriorDeclaration> priors = {
      {"softmax", true, "softmax(q k^T / sqrt(dk)) over the visible keys", make_softmax_prior},
      {"linear", true, "normalised linear attention, ReLU + eps features", make_linear_prior},
      {"gla", true, "linear attention with a data-dependent decay per head", make_gla_prior},
      {"aft", false, "AFT / LRNN-softmax: exp(per-channel key logits), causal running max", make_aft_prior},
      {"lrnn_decay", false, "the decay of GLA alone: exp(sum of per-head log decays)", make_lrnn_decay_prior},
      {"ssm", false, "selective SSM impulse response, normalised by the scan of ones", make_ssm_prior},
      {"delta", true, "the delta rule (DeltaNet), read normalised by its read of ones", make_delta_prior,
       ops::ImplSet{ops::Impl::naive}},
  };
  return priors;
}

std::vector<std::string> prior_names() {
  std::vector<std::string> names;
  for (const auto& p : prior_declarations()) names.push_back(p.name);
  return names;
}

const PriorDeclaration& prior_declaration(const std::string& name) {
  for (const auto& p : prior_declarations())
    if (p.name == name) return p;
  throw Error("unknown prior '" + name + "'; valid priors: " + join(prior_names()));
}

}  // namespace seqmix

// The list of priors: one line per prior, in the order `seqmix list` shows FEM's prior= choices. A prior's code and
// its declaration are its own file (softmax.cpp, linear.cpp, ...), which defines <name>_prior().
#include "prior.h"
#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"

#define SEQMIX_PRIORS(X) \
  X(softmax)             \
  X(linear)              \
  X(gla)                 \
  X(aft)                 \
  X(lrnn_decay)          \
  X(ssm)                 \
  X(delta)               \
  X(ema)

namespace seqmix {

#define SEQMIX_DECLARE_PRIOR(name) PriorDeclaration name##_prior();
SEQMIX_PRIORS(SEQMIX_DECLARE_PRIOR)
#undef SEQMIX_DECLARE_PRIOR

const std::vector<PriorDeclaration>& prior_declarations() {
#define SEQMIX_LIST_PRIOR(name) name##_prior(),
  static const std::vector<PriorDeclaration> priors = {SEQMIX_PRIORS(SEQMIX_LIST_PRIOR)};
#undef SEQMIX_LIST_PRIOR
  return priors;
}

std::vector<std::string> prior_names() {
  std::vector<std::string> names;
  for (const auto& p : prior_declarations()) names.push_back(p.name());
  return names;
}

const PriorDeclaration& prior_declaration(const std::string& name) {
  for (const auto& p : prior_declarations())
    if (p.name() == name) return p;
  throw Error("unknown prior '" + name + "'; valid priors: " + join(prior_names()));
}

Prior build_prior(const std::string& name, const PriorConfig& config, torch::nn::Module& home) {
  const PriorComponent& prior = prior_declaration(name).component;
  const std::any own = config.own.has_value()
                           ? config.own
                           : prior.parse(Options("prior " + name, prior.info.options, Spec{name, {}}));
  return prior.build(own, config, home);
}

}  // namespace seqmix

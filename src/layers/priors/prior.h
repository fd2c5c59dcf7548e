#pragma once
// Selection priors (FEM paper §2.3.3: a prior is any attention-like selection operator p_t). A prior turns the
// token features into its own parameters (queries and keys, decays, step sizes) and reads any value stream
// through its op, E_p[values], in parallel and step by step; it never sees what the values mean. Each prior has
// one home, src/layers/priors/<prior>.cpp, which owns its projections and parameters: a baseline mixer is value
// projection -> prior read -> output (softmax, linear, gla), and FEM is the same prior -> free-energy read.
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "seqmix/io/error.h"
#include "seqmix/layers/mixer_spec.h"
#include "seqmix/modules/decode_state.h"
#include "seqmix/modules/feature_map.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix {

// Where a prior's query/key projection lives, and so what the checkpoints call it.
//   separate: Linears "query" and "key" in the prior's own module (FEM: prior.query, prior.key);
//   packed:   one Linear "qkv" = [q | k | v] in the mixer (the baseline mixers: qkv), whose third part is the
//             mixer's value projection (the prior hands it over as PriorInputs::values).
enum class QueryKeyLayout { separate, packed };

struct PriorConfig {
  int64_t dim = 0, heads = 1;
  int64_t value_head_dim = 0;  // the width of one head's values
  int64_t qk_head_dim = 0;     // queries and keys (0 for priors without them)
  bool rope = false;
  double rope_theta = 10000.0;
  double eps = 1e-6;              // feature offset (ReLU + eps)
  bool bias = true;
  bool causal = true;
  ops::Impl impl = ops::Impl::automatic;
  // The prior's own options: the options struct its file declares (its PriorDeclarationOf<O>'s fields), or empty for
  // its defaults. FEM fills it from its spec; a baseline mixer that sets one builds the struct itself.
  std::any own;
  // What the baseline mixers set differently from FEM.
  QueryKeyLayout layout = QueryKeyLayout::separate;
  bool raw_values = false;                       // packed: qkv projects q and k only (the values are the inputs)
  FeatureMap feature = FeatureMap::Relu;         // linear, gla: the feature map on q and k
  double floor = ops::kPriorNormaliserFloor;     // the normaliser floor of the normalised read
  bool normalize = true;                         // linear priors: false reads the numerator q S alone, q scaled
                                                 // by 1/sqrt(qk head width) (gla normalize=0)
  bool cache_mask = true;                        // softmax: decode reads its cache through a key mask (FEM's padding)
  double score_scale = 0;                        // softmax: the score scale (0: 1/sqrt(qk head width))
};

// Token positions for RoPE: an offset (token t at offset + t; the baselines) or per-token positions [B,T] that
// count real tokens only (FEM, so padding shifts no position).
using Positions = std::variant<int64_t, at::Tensor>;

// Per-position prior parameters. T = 1 when decoding.
struct PriorInputs {
  at::Tensor q, k;        // [B,T,H,dk] (priors with queries and keys): softmax raw (after RoPE); linear/gla feature-mapped
  at::Tensor mask;        // [B,T] bool, or undefined
  at::Tensor values;      // packed layout: the value projection [B,T,H,dv] (the third part of qkv)
  at::Tensor cu_seqlens;  // int64 [S+1]: B = 1 holds packed sequences, each read alone (reads_packed priors only)
  // The prior's own per-token inputs by name, each [B,T,...] (decays, step sizes, key logits, write strengths): a
  // prior names its own in its file, and casting and slicing in time treat them all alike.
  std::map<std::string, at::Tensor> own;
  // own[name]; a missing name is a bug in the prior (std::logic_error naming it).
  const at::Tensor& input(const std::string& name) const;
  // The same inputs in another floating-point type (the mask stays bool).
  PriorInputs to(at::ScalarType type) const;
  // Position t of every per-token input, [B,1,...] (cu_seqlens is left out).
  PriorInputs at_position(int64_t t) const;
};

class PriorImpl : public torch::nn::Module {
 public:
  explicit PriorImpl(PriorConfig config) : config_(config) {}
  virtual std::string name() const = 0;
  virtual bool supports_bidirectional() const { return false; }
  // Whether read() takes packed sequences (in.cu_seqlens) in one call, its op walking the sequence boundaries.
  virtual bool reads_packed() const { return false; }
  // Packed layout: initialises the projections registered in the mixer, when the mixer's order of drawing its
  // parameters from the generator wants it (separate projections are initialised as they are made).
  virtual void init_parameters() {}
  // Width of the conditioner slice that modulates this prior's parameters (FEM's C flag).
  virtual int64_t modulation_width() const = 0;
  // x [B,T,D]; modulation [B,T,modulation_width()] or undefined (added to the parameters' pre-activations);
  // mask [B,T] bool or undefined.
  virtual PriorInputs prepare(const at::Tensor& x, const at::Tensor& modulation, const at::Tensor& mask,
                              const Positions& positions) = 0;
  // values [B,T,H,W] (W a multiple of the value head width) -> E_p[values] [B,T,H,W].
  virtual at::Tensor read(const at::Tensor& values, const PriorInputs& in) = 0;
  // The one-pass fused read of mu and F (values v [B,T,H,dv], beta [H*dv], value cap), where the prior has one
  // and the config asks for fused kernels; nullopt means: read [v, exp(beta v - shift)] through read().
  virtual std::optional<ops::FemRead> fused_free_energy_read(const at::Tensor& values, const at::Tensor& beta,
                                                             double cap, const PriorInputs& in) {
    return std::nullopt;
  }
  // Decode over values of width W per head: the prior's own state (a typed struct), and one step
  // values_t [B,H,W] -> E_p[values] at this step [B,H,W].
  virtual std::any init_state(int64_t batch, int64_t width) const = 0;
  virtual at::Tensor step(const at::Tensor& values_t, const PriorInputs& in_t, std::any& state) = 0;
  // A block of T steps at once: values [B,T,H,W] -> [B,T,H,W] (by default T single steps; the softmax prior
  // appends the block to its cache and reads it in one call).
  virtual at::Tensor prefill(const at::Tensor& values, const PriorInputs& in, std::any& state);
  // Multiplies value channels [begin, end) of every head in the state by factor [B,H,end-begin].
  virtual void rescale(std::any& state, int64_t begin, int64_t end, const at::Tensor& factor) = 0;
  const PriorConfig& config() const { return config_; }

  // read and step for layers in bfloat16 or float16: the values and the prior's inputs in float32 (float64 stays),
  // the result back in the values' dtype. A linear prior's read is a numerator and a normaliser joined by a
  // division; rounded to bfloat16 between its two ops they would cost the gradient its precision (float16: its
  // range too).
  at::Tensor read_in_float32(const at::Tensor& values, const PriorInputs& in);
  at::Tensor step_in_float32(const at::Tensor& values_t, const PriorInputs& in_t, std::any& state);

 protected:
  // The prior's state of type S; Error when the state was made by another mixer or prior.
  template <class S>
  S& state_of(std::any& state) const {
    if (auto* s = std::any_cast<S>(&state)) return *s;
    throw Error("prior " + name() + ": this decode state was made by another mixer or prior; start from the mixer's "
                "init_state");
  }
  PriorConfig config_;
};
using Prior = std::shared_ptr<PriorImpl>;

// A prior's own options struct O from its config (PriorConfig::own), O's defaults where the config left it empty.
template <class O>
O own_options(const PriorConfig& config) {
  if (!config.own.has_value()) return O{};
  if (const auto* o = std::any_cast<O>(&config.own)) return *o;
  throw std::logic_error("a prior config holds another prior's options (PriorConfig::own)");
}

// [..., dv] -> [..., n*dv]: per-channel prior parameters shared by the n value streams ([v, e] or [v, e, 1]).
at::Tensor tile_streams(const at::Tensor& t, int64_t n);

// A prior's declaration, written in its own file (src/layers/priors/<prior>.cpp) and listed once in priors.cpp, on
// the declaration template every registered component shares (include/seqmix/io/declaration.h): its name, meaning
// and own options (FEM's spec takes them: fem:prior=ssm,ssm_state=8, each bound to a field of the prior's options
// struct O), and `make`, which builds the prior from its parsed options, the config and `home`, where packed
// projections go (the mixer; separate ones go in the prior itself). Beside it, what FEM and the baseline mixers ask
// of a prior: whether it has queries and keys (RoPE applies) and the implementations its op has.
using PriorComponent = Declaration<Prior, const PriorConfig&, torch::nn::Module&>;
template <class O>
using PriorDeclarationOf = DeclarationOf<O, Prior, const PriorConfig&, torch::nn::Module&>;
struct PriorDeclaration {
  PriorComponent component;
  bool has_query_key = false;
  ops::ImplSet impls{ops::Impl::fused, ops::Impl::naive};  // the names its op takes (the op picks per device)
  const std::string& name() const { return component.info.name; }
};
// The make of a prior class P constructed from (config, home), its own options O in config.own.
template <class P, class O>
Prior make_prior(const O& own, const PriorConfig& config, torch::nn::Module& home) {
  PriorConfig with_own = config;
  with_own.own = own;
  return std::make_shared<P>(with_own, home);
}

// The key-value machinery of the softmax prior (q/k projection, cache, block prefill) with another read of its
// cache: the attention mixers that are not softmax (relu, light2nd1st). attend(q, k, v, causal, key_mask).
using AttendFn = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                          const at::Tensor& key_mask)>;
Prior make_key_value_prior(const PriorConfig& config, torch::nn::Module& home, const std::string& name, AttendFn attend);

// Every prior, in listing order (softmax, linear, gla, aft, lrnn_decay, ssm, ...); priors.cpp lists them.
const std::vector<PriorDeclaration>& prior_declarations();
// The declaration of `name`; throws Error listing the priors.
const PriorDeclaration& prior_declaration(const std::string& name);
std::vector<std::string> prior_names();
// The prior `name` made for config in home, with its own options from config.own (its defaults when empty).
Prior build_prior(const std::string& name, const PriorConfig& config, torch::nn::Module& home);

}  // namespace seqmix

#include "seqmix/layers/exact_linear_attention.h"

#include "seqmix/layers/mixer_spec.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"
#include "seqmix/ops/ela.h"

namespace seqmix {

ExactLinearAttentionImpl::ExactLinearAttentionImpl(const ExactLinearAttentionOptions& options)
    : MixerImpl(options.name, options.dim, options.causal), options_(options) {
  const std::string who = "mixer " + options.name + ": ";
  if (options.heads <= 0) throw Error(who + "heads must be at least 1 (got " + std::to_string(options.heads) + ")");
  if (options.dim % options.heads != 0)
    throw Error(who + "width " + std::to_string(options.dim) + " is not divisible by heads=" +
                std::to_string(options.heads));
  kernel_ = &ops::exact_kernel(options.kernel);  // unknown kernels fail here, listing the valid ones
  head_dim_ = options.dim / options.heads;
  if (options.rope && head_dim_ % 2 != 0)
    throw Error(who + "rope=1 needs an even head width (got " + std::to_string(head_dim_) + ")");
  if (!(options.scale > 0)) throw Error(who + "scale must be positive");
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(options.dim, 3 * options.dim)
                                                     .bias(options.bias)));
  init_linear(qkv);
  if (options.output) {
    out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim)
                                                       .bias(options.bias)));
    init_linear(out);
  }
}

ExactLinearAttentionImpl::Projected ExactLinearAttentionImpl::project(const torch::Tensor& x, int64_t offset) {
  auto parts = qkv(x).chunk(3, -1);
  auto q = split_heads(parts[0], options_.heads), k = split_heads(parts[1], options_.heads);
  if (options_.rope) {
    q = apply_rotary(q, offset, options_.rope_theta);
    k = apply_rotary(k, offset, options_.rope_theta);
  }
  if (options_.scale != 1.0) {
    q = q * options_.scale;
    k = k * options_.scale;
  }
  return {q, k, split_heads(parts[2], options_.heads)};
}

torch::Tensor ExactLinearAttentionImpl::finish(const torch::Tensor& y) {
  auto merged = merge_heads(y);
  return out ? out(merged) : merged;
}

torch::Tensor ExactLinearAttentionImpl::forward(const torch::Tensor& x) {
  check_input(x);
  auto p = project(x, 0);
  const auto& kernel = *kernel_;
  auto y = ops::ela(p.q, p.k, p.v,
                    {.kernel = kernel.name, .causal = is_causal(), .eps = options_.eps, .impl = options_.impl})
               .y;
  return finish(y);
}

DecodeState ExactLinearAttentionImpl::init_state(int64_t batch) const {
  check_decodable();
  // The op's state, as ela_step takes it (key_max empty for the kernels without one).
  const auto options = recurrent_state_options(qkv->weight.options());
  const auto s = ops::ela_initial_state(
      batch, options_.heads, head_dim_, head_dim_,
      {.kernel = kernel_->name, .dtype = options.dtype().toScalarType(), .device = options.device()});
  return DecodeState::of(ops::ElaState{s.kv, s.k_sum, s.key_max});
}

torch::Tensor ExactLinearAttentionImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  const auto& kernel = *kernel_;
  auto p = project(x_t.unsqueeze(1), state.position);
  auto& s = state.as<ops::ElaState>(kind());
  const auto r = ops::ela_step(p.q.squeeze(1), p.k.squeeze(1), p.v.squeeze(1), s.kv, s.k_sum, s.key_max,
                               {.kernel = kernel.name, .eps = options_.eps});
  s = {r.kv, r.k_sum, r.key_max};
  const auto& y = r.y;
  state.position += 1;
  return finish(y.unsqueeze(1)).squeeze(1);
}

namespace {

// The ELA kernels with their feature maps, for `seqmix list`.
std::vector<std::string> ela_notes() {
  std::vector<std::string> notes{"kernels:"};
  for (const auto& name : ops::exact_kernel_names()) notes.push_back("  " + name + ": " + ops::exact_kernel(name).description);
  return notes;
}
}  // namespace

const MixerDeclaration& ela_mixer_declaration() {
  using O = ExactLinearAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "ela",
          .meaning = "Exact Linear Attention: row-normalised attention under an exactly decomposable kernel, O(T)",
          .fields = {Field<O>::integer("heads", &O::heads, "number of heads (must divide the width)", 1),
                     Field<O>::text("kernel", &O::kernel,
                                    "hadamard_exp, sum_sq_euclidean, sub_sq_euclidean, direction_magnitude, or a "
                                    "registered one"),
                     Field<O>::flag("rope", &O::rope, "rotary position embedding on q and k"),
                     Field<O>::real("rope_theta", &O::rope_theta, "RoPE base", 1.0),
                     Field<O>::real("scale", &O::scale, "q and k are multiplied by it before the kernel", 1e-12),
                     Field<O>::flag("bias", &O::bias, "biases in the projections"),
                     Field<O>::flag("out", &O::output, "output projection"),
                     Field<O>::real("eps", &O::eps, "row-sum floor", 0.0),
                     Field<O>::flag("causal", &O::causal, "causal (prefix sums) or bidirectional (one accumulation)"),
                     Field<O>::impl(&O::impl, ops::kElaImpls, "fused kernel or its naive (materialised) twin")},
          .make = make_layer<ExactLinearAttentionImpl, O>,
          .notes = ela_notes()}
          .erase();
  return declaration;
}

}  // namespace seqmix

#include "seqmix/layers/second_order_attention.h"

#include "../kv_attention_fields.h"
#include "query_preimage.h"

#include <torch/torch.h>

#include <cmath>

#include "seqmix/io/error.h"
#include "seqmix/modules/heads.h"
#include "seqmix/modules/init.h"
#include "seqmix/modules/rotary.h"
#include "seqmix/ops/second_order.h"

namespace seqmix {

LightMha2nd1stImpl::LightMha2nd1stImpl(const SecondOrderAttentionOptions& options)
    : KVAttentionImpl("light2nd1st", options) {
  tau = register_parameter("tau", torch::full({options.heads}, options.tau));
}

torch::Tensor LightMha2nd1stImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         bool causal) {
  return ops::light2nd1st_read(q, k, v, 1.0 / std::sqrt(static_cast<double>(q.size(-1))), tau, {.causal = causal});
}

Mha2nd1stImpl::Mha2nd1stImpl(const SecondOrderAttentionOptions& options)
    : MixerImpl("mha2nd1st", options.dim, options.causal), options_(options) {
  if (options.heads <= 0 || options.dim % options.heads != 0)
    throw Error("mixer mha2nd1st: width " + std::to_string(options.dim) + " is not divisible by heads=" +
                std::to_string(options.heads));
  head_dim_ = options.dim / options.heads;
  if (options.rope && head_dim_ % 2 != 0)
    throw Error("mixer mha2nd1st: rope=1 needs an even head width (got " + std::to_string(head_dim_) + ")");
  if (options.raw_values) throw Error("mixer mha2nd1st never reads the attended tokens' values (no raw-value read)");
  qk = register_module("qk", torch::nn::Linear(torch::nn::LinearOptions(options.dim, 2 * options.dim).bias(options.bias)));
  init_linear(qk);
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(options.dim, options.dim).bias(options.bias)));
  init_linear(out);
  value_weight = register_parameter("value_weight", torch::randn({options.heads, head_dim_, options.dim}) * 0.02);
  temperature = register_parameter("temperature", torch::full({options.heads}, std::sqrt(2.0 * head_dim_)));
  bias_temperature = register_parameter("bias_temperature", torch::full({options.heads}, options.tau));
}

std::pair<torch::Tensor, torch::Tensor> Mha2nd1stImpl::project(const torch::Tensor& x, int64_t offset) {
  auto parts = qk(x).chunk(2, -1);
  auto q = split_heads(parts[0], options_.heads), k = split_heads(parts[1], options_.heads);
  if (options_.rope) {
    q = apply_rotary(q, offset, options_.rope_theta);
    k = apply_rotary(k, offset, options_.rope_theta);
  }
  return {q, k};
}

torch::Tensor Mha2nd1stImpl::directions(const torch::Tensor& q, const torch::Tensor& keys, bool causal,
                                        int64_t offset) {
  auto scale = options_.bias_temperature_divides ? bias_temperature.reciprocal() : bias_temperature;
  auto direction = ops::mha2nd1st_read(q, keys, temperature, scale, {.causal = causal});  // u + b, [B,T,H,d_h]
  if (options_.rope) {  // R_t^T: rotate back by the query's own angle
    auto back = -torch::arange(offset, offset + q.size(1), q.options().dtype(torch::kLong));
    direction = apply_rotary(direction, back.unsqueeze(0).expand({q.size(0), q.size(1)}), options_.rope_theta);
  }
  auto wq = qk->weight.narrow(0, 0, options_.dim).view({options_.heads, head_dim_, options_.dim});  // [H,d_h,D]
  return query_preimage(wq, direction);                                                               // [B,T,H,D]
}

torch::Tensor Mha2nd1stImpl::read(const torch::Tensor& q, const torch::Tensor& keys, bool causal, int64_t offset) {
  // W_V,h r_h per head, then W_O.
  auto values = torch::einsum("bthd,hed->bthe", {directions(q, keys, causal, offset), value_weight});
  return out(merge_heads(values));
}

torch::Tensor Mha2nd1stImpl::forward(const torch::Tensor& x) {
  check_input(x);
  auto [q, k] = project(x, 0);
  return read(q, k, is_causal(), 0);
}

namespace {
struct KeyCache {
  torch::Tensor k;  // [B,S,H,d]: MHA2nd1st reads the keys only
};
}  // namespace

DecodeState Mha2nd1stImpl::init_state(int64_t batch) const {
  check_decodable();
  return DecodeState::of(KeyCache{torch::zeros({batch, 0, options_.heads, head_dim_}, qk->weight.options())});
}

torch::Tensor Mha2nd1stImpl::prefill(const torch::Tensor& x, DecodeState& state) {
  check_input(x);
  check_decodable();
  const int64_t offset = state.position;
  auto& cache = state.as<KeyCache>(kind());
  auto [q, k] = project(x, offset);
  cache.k = torch::cat({cache.k, k}, 1);
  state.position += x.size(1);
  return read(q, cache.k, /*causal=*/true, offset);
}

torch::Tensor Mha2nd1stImpl::step(const torch::Tensor& x_t, DecodeState& state) {
  check_step_input(x_t);
  return prefill(x_t.unsqueeze(1), state).squeeze(1);
}

namespace {
// The second-order reads never return the attended values themselves: no raw-value read for the probe model.
template <class L>
Mixer make_second_order(const SecondOrderAttentionOptions& o, const MixerContext& context) {
  refuse_raw_values(context);
  return make_layer<L>(o, context);
}
}  // namespace

const MixerDeclaration& mha2nd1st_mixer_declaration() {
  using O = SecondOrderAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{
          .name = "mha2nd1st",
          .meaning = "MHA2nd1st: Newton step with a first-order Taylor inverse, Euclidean scores, key covariance bias",
          .fields = kv_attention_fields<O>({Field<O>::choice(
              "bias_temperature", &O::bias_temperature_divides, {{"multiplier", false}, {"divisor", true}},
              "the learnable bias temperature (init 0.01) multiplies or divides b_h")}),
          .make = make_second_order<Mha2nd1stImpl>}
          .erase();
  return declaration;
}

const MixerDeclaration& light2nd1st_mixer_declaration() {
  using O = SecondOrderAttentionOptions;
  static const MixerDeclaration declaration =
      MixerDeclarationOf<O>{.name = "light2nd1st",
                            .meaning = "LightMHA2nd1st: softmax attention plus tau_h Cov_p(v) vbar per head",
                            .fields = kv_attention_fields<O>({Field<O>::real("tau", &O::tau, "initial tau_h")}),
                            .make = make_second_order<LightMha2nd1stImpl>}
          .erase();
  return declaration;
}

}  // namespace seqmix

// The seqmix ops as PyTorch operators: TORCH_LIBRARY(seqmix) for torch.ops.seqmix.* (python/seqmix wraps
// them). Built into libseqmix_ops.so only (not the static core): loading it registers the schemas.
//
// Each op has two kernels. The Autograd kernel calls the same function as the C++ layers, whose
// custom autograd Function (the fused kernels' hand-written backward) or ATen graph (the naive twins)
// records the backward. The CPU kernel is what the dispatcher runs below autograd (inference mode, or a
// caller that excluded the autograd keys): the same function with gradient recording off.
// `impl` picks the fused kernel or its naive twin (or, for attention, PyTorch's own kernel), as `impl=` does in
// a mixer spec.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <tuple>

#include "seqmix/io/safetensors.h"
#include "seqmix/ops/aft.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/ela.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/hypermlp.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/prior_read.h"
#include "seqmix/ops/second_order_attention.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {
namespace {

using at::Tensor;
using TensorPair = std::tuple<Tensor, Tensor>;

// The floor of a prior's normaliser in the FEM reads (as the FEM layer's).
constexpr double kNormaliserFloor = 1e-30;

// Whether `op` (which has fused and naive implementations only) runs its fused kernel.
bool fused(c10::string_view impl, const char* op) { return runs_fused(parse_impl(std::string(impl)), op); }
Tensor or_undefined(const c10::optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }
double scale_or_default(c10::optional<double> scale, const Tensor& q) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}
TensorPair pair(const PriorRead& r) { return {r.numerator, r.normaliser}; }
TensorPair pair(const FemRead& r) { return {r.mean, r.free_energy}; }

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, c10::optional<double> scale,
                 const c10::optional<Tensor>& key_mask, c10::string_view impl) {
  return softmax_attention(q, k, v, causal, scale_or_default(scale, q), or_undefined(key_mask),
                           parse_impl(std::string(impl)));
}

Tensor relu_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double eps) {
  return relu_attention_naive(q, k, v, causal, eps);
}

TensorPair fem_softmax_read(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, double cap,
                            bool causal, c10::optional<double> scale, const c10::optional<Tensor>& key_mask,
                            c10::string_view impl) {
  const double s = scale_or_default(scale, q);
  return pair(fused(impl, "fem_softmax_read") ? fem_softmax_read_fused(q, k, v, beta, cap, causal, s, or_undefined(key_mask))
                          : fem_softmax_read_naive(q, k, v, beta, cap, causal, s, or_undefined(key_mask)));
}

TensorPair scale_values(const Tensor& v, const Tensor& beta, double cap) {
  const FemValues values = fem_scale_values(v, beta, cap);
  // Outputs are new tensors, as the schema says: with cap 0 the clipped values are v itself.
  return {values.clipped.is_same(v) ? v.clone() : values.clipped, values.scaled};
}

TensorPair linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, c10::string_view impl) {
  return pair(fused(impl, "linear_attention") ? linear_attention_fused(q, k, v, causal) : linear_attention_naive(q, k, v, causal));
}

TensorPair gla(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_decay, c10::string_view impl) {
  return pair(fused(impl, "gla") ? gla_fused(q, k, v, log_decay) : gla_naive(q, k, v, log_decay));
}

TensorPair aft(const Tensor& k, const Tensor& v, const c10::optional<Tensor>& mask, c10::string_view impl) {
  return pair(fused(impl, "aft") ? aft_fused(k, v, or_undefined(mask)) : aft_naive(k, v, or_undefined(mask)));
}

Tensor ssm_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& b, const Tensor& c,
                c10::string_view impl) {
  return fused(impl, "ssm_scan") ? ssm_scan_fused(u, delta, A, b, c) : ssm_scan_naive(u, delta, A, b, c);
}

Tensor normalised(const Tensor& numerator, const Tensor& normaliser, double eps) {
  return normalised_read({numerator, normaliser}, eps);
}

// The free-energy read through a linear prior, as the FEM layer reads it with a value cap: mean
// E_p[clip(v)] and F = (log E_p[exp(u - cap)] + cap) / beta with u = beta clip(v), both from one read of the
// values [clip(v), exp(u - cap)] concatenated on the last axis (the prior is linear in its values), in float64
// because exp(u - cap) reaches exp(-2 cap). v [B,T,H,dv] (per-head priors, beta [H*dv] or [H,dv]) or [B,T,C]
// (per-channel priors, beta [C]); `read` maps the doubled values to their normalised read, same shape.
TensorPair fem_linear_prior_read(const char* op, const Tensor& v, const Tensor& beta, double cap,
                                 const std::function<Tensor(const Tensor&)>& read) {
  TORCH_CHECK(v.dim() == 3 || v.dim() == 4, op, ": v must be [B,T,H,dv] or [B,T,C] (got ", v.sizes(), ")");
  TORCH_CHECK(cap > 0 && cap <= kMaxConstantShiftCap, op, ": cap must be in (0, ", kMaxConstantShiftCap, "] (got ",
              cap, ")");
  const auto channel_shape = v.sizes().slice(2);  // [H,dv] or [C]
  const int64_t channels = c10::multiply_integers(channel_shape);
  TORCH_CHECK(beta.numel() == channels, op, ": beta must have ", channels, " entries, one per value channel (got ",
              beta.sizes(), ")");
  const FemValues values = fem_scale_values(v.flatten(2), beta.reshape({channels}), cap);
  const auto wide = torch::kDouble;
  const Tensor clipped = values.clipped.view(v.sizes()), scaled = values.scaled.view(v.sizes());
  const Tensor r = read(torch::cat({clipped, (scaled - cap).exp()}, -1).to(wide));
  const int64_t last = v.size(-1);
  const Tensor mean = r.narrow(-1, 0, last), z = r.narrow(-1, last, last);
  const Tensor smallest = torch::full({}, std::numeric_limits<double>::min(), z.options());
  const Tensor free_energy = (torch::maximum(z, smallest).log() + cap) / beta.to(wide).reshape(channel_shape);
  return {mean.to(v.scalar_type()), free_energy.to(v.scalar_type())};
}

TensorPair fem_linear_read(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, double cap,
                           bool causal, c10::string_view impl) {
  TORCH_CHECK(v.dim() == 4, "fem_linear_read: v must be [B,T,H,dv] (got ", v.sizes(), ")");
  const bool use_fused = fused(impl, "fem_linear_read");
  return fem_linear_prior_read("fem_linear_read", v, beta, cap, [&](const Tensor& values) {
    const auto wq = q.to(values.scalar_type()), wk = k.to(values.scalar_type());
    return normalised_read(use_fused ? linear_attention_fused(wq, wk, values, causal)
                                     : linear_attention_naive(wq, wk, values, causal),
                           kNormaliserFloor);
  });
}

TensorPair fem_gla_read(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_decay, const Tensor& beta,
                        double cap, c10::string_view impl) {
  TORCH_CHECK(v.dim() == 4, "fem_gla_read: v must be [B,T,H,dv] (got ", v.sizes(), ")");
  const bool use_fused = fused(impl, "fem_gla_read");
  return fem_linear_prior_read("fem_gla_read", v, beta, cap, [&](const Tensor& values) {
    const auto type = values.scalar_type();
    const auto wq = q.to(type), wk = k.to(type), wa = log_decay.to(type);
    return normalised_read(use_fused ? gla_fused(wq, wk, values, wa) : gla_naive(wq, wk, values, wa), kNormaliserFloor);
  });
}

TensorPair fem_aft_read(const Tensor& k, const Tensor& v, const Tensor& beta, double cap,
                        const c10::optional<Tensor>& mask, c10::string_view impl) {
  TORCH_CHECK(v.dim() == 3 && k.sizes() == v.sizes(), "fem_aft_read: k and v must both be [B,T,C] (got ", k.sizes(),
              " and ", v.sizes(), ")");
  const bool use_fused = fused(impl, "fem_aft_read");
  return fem_linear_prior_read("fem_aft_read", v, beta, cap, [&](const Tensor& values) {
    const auto keys = torch::cat({k, k}, -1).to(values.scalar_type());  // each channel's key logit, for both streams
    const auto m = or_undefined(mask);
    return normalised_read(use_fused ? aft_fused(keys, values, m) : aft_naive(keys, values, m), kNormaliserFloor);
  });
}

Tensor ela(const Tensor& q, const Tensor& k, const Tensor& v, c10::string_view kernel, bool causal, double eps,
           c10::string_view impl) {
  const ExactKernel& chosen = exact_kernel(std::string(kernel));
  return fused(impl, "ela") ? ela_fused(q, k, v, chosen, causal, eps) : ela_naive(q, k, v, chosen, causal, eps);
}

HyperMixing mixing(const c10::optional<Tensor>& diag, const c10::optional<Tensor>& U, const c10::optional<Tensor>& Vt,
                   const char* side) {
  const int given = diag.has_value() + U.has_value() + Vt.has_value();
  TORCH_CHECK(given == 0 || given == 3, "hypermlp_read: the mixing ", side,
              " needs all of diag, U and Vt, or none of them (got ", given, ")");
  return given == 0 ? HyperMixing{} : HyperMixing{*diag, *U, *Vt};
}

Tensor hypermlp_read(const Tensor& q, const Tensor& k, const Tensor& v, const c10::optional<Tensor>& s1,
                     const c10::optional<Tensor>& diag1, const c10::optional<Tensor>& U1,
                     const c10::optional<Tensor>& Vt1, const c10::optional<Tensor>& s2,
                     const c10::optional<Tensor>& diag2, const c10::optional<Tensor>& U2,
                     const c10::optional<Tensor>& Vt2, c10::string_view activation, c10::string_view layout,
                     double eps, double scale, int64_t block, c10::string_view impl) {
  HyperReadOptions options;
  if (activation == "relu")
    options.activation = HyperActivation::relu;
  else if (activation == "glu")
    options.activation = HyperActivation::glu;
  else if (activation == "softmax")
    options.activation = HyperActivation::softmax;
  else
    TORCH_CHECK(false, "hypermlp_read: unknown activation '", activation, "' (expected relu, glu or softmax)");
  if (layout == "lag")
    options.layout = HyperLayout::lag;
  else if (layout == "forward")
    options.layout = HyperLayout::forward;
  else
    TORCH_CHECK(false, "hypermlp_read: unknown layout '", layout, "' (expected lag or forward)");
  options.eps = eps;
  options.scale = scale;
  options.block = block;
  const HyperMixing before = mixing(diag1, U1, Vt1, "before the activation");
  const HyperMixing after = mixing(diag2, U2, Vt2, "after the activation");
  TORCH_CHECK(before.defined() == s1.has_value(), "hypermlp_read: s1 and the mixing before go together");
  TORCH_CHECK(after.defined() == s2.has_value(), "hypermlp_read: s2 and the mixing after go together");
  return fused(impl, "hypermlp_read") ? hypermlp_read_blocked(q, k, v, or_undefined(s1), before, or_undefined(s2), after, options)
                     : hypermlp_read_dense(q, k, v, or_undefined(s1), before, or_undefined(s2), after, options);
}

Tensor mha2nd1st(const Tensor& q, const Tensor& k, const Tensor& temperature, const Tensor& bias_scale, bool causal,
                 c10::string_view impl) {
  return fused(impl, "mha2nd1st_read") ? mha2nd1st_read(q, k, temperature, bias_scale, causal)
                     : mha2nd1st_read_covariance(q, k, temperature, bias_scale, causal);
}

Tensor light2nd1st(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& tau, bool causal,
                   c10::string_view impl) {
  return fused(impl, "light2nd1st_read") ? light2nd1st_read(q, k, v, scale, tau, causal)
                     : light2nd1st_read_covariance(q, k, v, scale, tau, causal);
}

// The FEM read under the selective-SSM prior, per channel: the prior's weights are the scan's impulse
// response, normalised by the scan of ones (plus the skip D u in both), as the FEM layer's SSM prior reads
// real tokens (this op has no padding mask).
// v, delta [B,T,C], A [C,N], b, c [B,T,N], D [C] (optional), beta [C].
TensorPair fem_ssm_read(const Tensor& v, const Tensor& delta, const Tensor& A, const Tensor& b, const Tensor& c,
                        const c10::optional<Tensor>& D, const Tensor& beta, double cap, c10::string_view impl) {
  TORCH_CHECK(v.dim() == 3, "fem_ssm_read: v must be [B,T,C] (got ", v.sizes(), ")");
  const bool use_fused = fused(impl, "fem_ssm_read");
  return fem_linear_prior_read("fem_ssm_read", v, beta, cap, [&](const Tensor& values) {
    const auto type = values.scalar_type();
    // One scan over [values (2C), ones (C)]: the two numerators and the shared normaliser.
    const auto u = torch::cat({values, torch::ones_like(v, values.options())}, -1);
    const auto tile = [](const Tensor& t, int64_t dim) { return torch::cat({t, t, t}, dim); };
    const auto wd = tile(delta.to(type), -1), wA = tile(A.to(type), 0), wb = b.to(type), wc = c.to(type);
    auto y = use_fused ? ssm_scan_fused(u, wd, wA, wb, wc) : ssm_scan_naive(u, wd, wA, wb, wc);
    if (D.has_value()) y = y + u * tile(D->to(type), 0);
    const int64_t C = v.size(-1);
    const auto den = y.narrow(-1, 2 * C, C);
    return y.narrow(-1, 0, 2 * C) / torch::cat({den, den}, -1).clamp_min(kNormaliserFloor);
  });
}

// Decode steps, functional: the state goes in and the updated state comes out (nothing is modified).
std::tuple<Tensor, Tensor, Tensor, Tensor> linear_attention_decode(const Tensor& q_t, const Tensor& k_t,
                                                                   const Tensor& v_t, const Tensor& kv,
                                                                   const Tensor& k_sum) {
  LinearAttentionState state{kv, k_sum};
  const PriorRead r = linear_attention_step(q_t, k_t, v_t, state);
  return {r.numerator, r.normaliser, state.kv, state.k_sum};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> gla_decode(const Tensor& q_t, const Tensor& k_t, const Tensor& v_t,
                                                      const Tensor& log_decay_t, const Tensor& kv, const Tensor& k_sum) {
  LinearAttentionState state{kv, k_sum};
  const PriorRead r = gla_step(q_t, k_t, v_t, log_decay_t, state);
  return {r.numerator, r.normaliser, state.kv, state.k_sum};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> aft_decode(const Tensor& k_t, const Tensor& v_t,
                                                              const Tensor& numerator, const Tensor& normaliser,
                                                              const Tensor& key_max, const c10::optional<Tensor>& mask_t) {
  AftState state{numerator, normaliser, key_max};
  const PriorRead r = aft_step(k_t, v_t, state, or_undefined(mask_t));
  // The read is a view of the new state; outputs must not alias each other.
  return {r.numerator.clone(), r.normaliser.clone(), state.numerator, state.normaliser, state.key_max};
}

TensorPair ssm_decode(const Tensor& u_t, const Tensor& delta_t, const Tensor& A, const Tensor& b_t, const Tensor& c_t,
                      const Tensor& state) {
  Tensor next = state;
  Tensor y = ssm_step(u_t, delta_t, A, b_t, c_t, next);
  return {y, next};
}

// key_max is empty ([0]) for kernels without one (all but hadamard_exp), in and out.
std::tuple<Tensor, Tensor, Tensor, Tensor> ela_decode(const Tensor& q_t, const Tensor& k_t, const Tensor& v_t,
                                                      const Tensor& kv, const Tensor& k_sum, const Tensor& key_max,
                                                      c10::string_view kernel, double eps) {
  ElaState state{kv, k_sum, key_max.numel() == 0 ? Tensor() : key_max};
  const Tensor y = ela_step(q_t, k_t, v_t, exact_kernel(std::string(kernel)), state, eps);
  return {y, state.kv, state.k_sum, state.key_max.defined() ? state.key_max : torch::empty({0}, kv.options())};
}

// Initial decode states (no tensor argument: one kernel for every dispatch key).
at::TensorOptions options_of(c10::optional<at::ScalarType> dtype) {
  return at::TensorOptions().dtype(dtype.value_or(at::kFloat));
}

TensorPair linear_attention_initial(int64_t batch, int64_t heads, int64_t dk, int64_t dv,
                                    c10::optional<at::ScalarType> dtype) {
  const LinearAttentionState s = linear_attention_initial_state(batch, heads, dk, dv, options_of(dtype));
  return {s.kv, s.k_sum};
}

std::tuple<Tensor, Tensor, Tensor> aft_initial(int64_t batch, int64_t channels, c10::optional<at::ScalarType> dtype) {
  const AftState s = aft_initial_state(batch, channels, options_of(dtype));
  return {s.numerator, s.normaliser, s.key_max};
}

std::tuple<Tensor, Tensor, Tensor> ela_initial(int64_t batch, int64_t heads, int64_t dk, int64_t dv,
                                               c10::string_view kernel, c10::optional<at::ScalarType> dtype) {
  const ElaState s = ela_initial_state(batch, heads, dk, dv, exact_kernel(std::string(kernel)), options_of(dtype));
  return {s.kv, s.k_sum, s.key_max.defined() ? s.key_max : torch::empty({0}, options_of(dtype))};
}

// A checkpoint's tensors by the C++ reader (python/seqmix reads them in pure Python; the tests compare).
std::tuple<std::vector<std::string>, std::vector<Tensor>> read_safetensors_file(c10::string_view path) {
  SafetensorsFile file;
  try {
    file = read_safetensors(std::string(path));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  std::vector<std::string> names;
  std::vector<Tensor> tensors;
  for (auto& [name, tensor] : file.tensors) {
    names.push_back(name);
    tensors.push_back(tensor);
  }
  return {names, tensors};
}

// The CPU kernel of op f: f with gradient recording off (the dispatcher only comes here below autograd).
template <class F, F* f>
struct BelowAutograd;
template <class R, class... Args, R (*f)(Args...)>
struct BelowAutograd<R(Args...), f> {
  static R call(Args... args) {
    at::AutoDispatchBelowADInplaceOrView below;
    torch::NoGradGuard no_grad;
    return f(args...);
  }
};

}  // namespace
}  // namespace seqmix::ops

TORCH_LIBRARY(seqmix, m) {
  m.def("attention(Tensor q, Tensor k, Tensor v, bool causal=True, float? scale=None, Tensor? key_mask=None, "
        "str impl='fused') -> Tensor");
  m.def("relu_attention(Tensor q, Tensor k, Tensor v, bool causal=True, float eps=1e-12) -> Tensor");
  m.def("fem_softmax_read(Tensor q, Tensor k, Tensor v, Tensor beta, float cap=40., bool causal=True, "
        "float? scale=None, Tensor? key_mask=None, str impl='fused') -> (Tensor mean, Tensor free_energy)");
  m.def("fem_scale_values(Tensor v, Tensor beta, float cap) -> (Tensor clipped, Tensor scaled)");
  m.def("fem_restore(Tensor z, Tensor shift, Tensor beta) -> Tensor");
  m.def("fem_linear_read(Tensor q, Tensor k, Tensor v, Tensor beta, float cap=40., bool causal=True, "
        "str impl='fused') -> (Tensor mean, Tensor free_energy)");
  m.def("fem_gla_read(Tensor q, Tensor k, Tensor v, Tensor log_decay, Tensor beta, float cap=40., "
        "str impl='fused') -> (Tensor mean, Tensor free_energy)");
  m.def("fem_aft_read(Tensor k, Tensor v, Tensor beta, float cap=40., Tensor? mask=None, str impl='fused') "
        "-> (Tensor mean, Tensor free_energy)");
  m.def("linear_attention(Tensor q, Tensor k, Tensor v, bool causal=True, str impl='fused') "
        "-> (Tensor numerator, Tensor normaliser)");
  m.def("gla(Tensor q, Tensor k, Tensor v, Tensor log_decay, str impl='fused') -> (Tensor numerator, Tensor normaliser)");
  m.def("aft(Tensor k, Tensor v, Tensor? mask=None, str impl='fused') -> (Tensor numerator, Tensor normaliser)");
  m.def("ssm_scan(Tensor u, Tensor delta, Tensor A, Tensor b, Tensor c, str impl='fused') -> Tensor");
  m.def("normalised_read(Tensor numerator, Tensor normaliser, float eps) -> Tensor");
  m.def("ela(Tensor q, Tensor k, Tensor v, str kernel='hadamard_exp', bool causal=True, float eps=1e-8, "
        "str impl='fused') -> Tensor");
  m.def("hypermlp_read(Tensor q, Tensor k, Tensor v, Tensor? s1=None, Tensor? diag1=None, Tensor? U1=None, "
        "Tensor? Vt1=None, Tensor? s2=None, Tensor? diag2=None, Tensor? U2=None, Tensor? Vt2=None, "
        "str activation='relu', str layout='lag', float eps=1e-12, float scale=1., int block=256, "
        "str impl='fused') -> Tensor");
  m.def("mha2nd1st_read(Tensor q, Tensor k, Tensor temperature, Tensor bias_scale, bool causal=True, "
        "str impl='fused') -> Tensor");
  m.def("light2nd1st_read(Tensor q, Tensor k, Tensor v, float scale, Tensor tau, bool causal=True, "
        "str impl='fused') -> Tensor");
  m.def("fem_ssm_read(Tensor v, Tensor delta, Tensor A, Tensor b, Tensor c, Tensor? D, Tensor beta, float cap=40., "
        "str impl='fused') -> (Tensor mean, Tensor free_energy)");
  m.def("linear_attention_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor kv, Tensor k_sum) "
        "-> (Tensor numerator, Tensor normaliser, Tensor kv, Tensor k_sum)");
  m.def("gla_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor log_decay_t, Tensor kv, Tensor k_sum) "
        "-> (Tensor numerator, Tensor normaliser, Tensor kv, Tensor k_sum)");
  m.def("aft_step(Tensor k_t, Tensor v_t, Tensor numerator, Tensor normaliser, Tensor key_max, Tensor? mask_t=None) "
        "-> (Tensor numerator, Tensor normaliser, Tensor state_numerator, Tensor state_normaliser, Tensor key_max)");
  m.def("ssm_step(Tensor u_t, Tensor delta_t, Tensor A, Tensor b_t, Tensor c_t, Tensor state) -> (Tensor y, Tensor state)");
  m.def("ela_step(Tensor q_t, Tensor k_t, Tensor v_t, Tensor kv, Tensor k_sum, Tensor key_max, "
        "str kernel='hadamard_exp', float eps=1e-8) -> (Tensor y, Tensor kv, Tensor k_sum, Tensor key_max)");
  // No tensor argument to dispatch on: one kernel for every key.
  m.def("linear_attention_initial_state(int batch, int heads, int dk, int dv, ScalarType? dtype=None) "
        "-> (Tensor kv, Tensor k_sum)",
        &seqmix::ops::linear_attention_initial);
  m.def("aft_initial_state(int batch, int channels, ScalarType? dtype=None) "
        "-> (Tensor numerator, Tensor normaliser, Tensor key_max)",
        &seqmix::ops::aft_initial);
  m.def("ela_initial_state(int batch, int heads, int dk, int dv, str kernel='hadamard_exp', ScalarType? dtype=None) "
        "-> (Tensor kv, Tensor k_sum, Tensor key_max)",
        &seqmix::ops::ela_initial);
  m.def("read_safetensors(str path) -> (str[] names, Tensor[] tensors)", &seqmix::ops::read_safetensors_file);
}

// Below autograd: the same functions with gradient recording off.
TORCH_LIBRARY_IMPL(seqmix, CPU, m) {
#define SEQMIX_BELOW_AUTOGRAD(name, f) \
  m.impl(name, TORCH_FN((seqmix::ops::BelowAutograd<std::remove_pointer_t<decltype(&seqmix::ops::f)>, &seqmix::ops::f>::call)))
  SEQMIX_BELOW_AUTOGRAD("attention", attention);
  SEQMIX_BELOW_AUTOGRAD("relu_attention", relu_attention);
  SEQMIX_BELOW_AUTOGRAD("fem_softmax_read", fem_softmax_read);
  SEQMIX_BELOW_AUTOGRAD("fem_scale_values", scale_values);
  SEQMIX_BELOW_AUTOGRAD("fem_restore", fem_restore);
  SEQMIX_BELOW_AUTOGRAD("fem_linear_read", fem_linear_read);
  SEQMIX_BELOW_AUTOGRAD("fem_gla_read", fem_gla_read);
  SEQMIX_BELOW_AUTOGRAD("fem_aft_read", fem_aft_read);
  SEQMIX_BELOW_AUTOGRAD("linear_attention", linear_attention);
  SEQMIX_BELOW_AUTOGRAD("gla", gla);
  SEQMIX_BELOW_AUTOGRAD("aft", aft);
  SEQMIX_BELOW_AUTOGRAD("ssm_scan", ssm_scan);
  SEQMIX_BELOW_AUTOGRAD("normalised_read", normalised);
  SEQMIX_BELOW_AUTOGRAD("ela", ela);
  SEQMIX_BELOW_AUTOGRAD("hypermlp_read", hypermlp_read);
  SEQMIX_BELOW_AUTOGRAD("mha2nd1st_read", mha2nd1st);
  SEQMIX_BELOW_AUTOGRAD("light2nd1st_read", light2nd1st);
  SEQMIX_BELOW_AUTOGRAD("fem_ssm_read", fem_ssm_read);
  SEQMIX_BELOW_AUTOGRAD("linear_attention_step", linear_attention_decode);
  SEQMIX_BELOW_AUTOGRAD("gla_step", gla_decode);
  SEQMIX_BELOW_AUTOGRAD("aft_step", aft_decode);
  SEQMIX_BELOW_AUTOGRAD("ssm_step", ssm_decode);
  SEQMIX_BELOW_AUTOGRAD("ela_step", ela_decode);
#undef SEQMIX_BELOW_AUTOGRAD
}

// With autograd: the functions the C++ layers call, which record their own backward.
TORCH_LIBRARY_IMPL(seqmix, Autograd, m) {
  using namespace seqmix::ops;
  m.impl("attention", TORCH_FN(attention));
  m.impl("relu_attention", TORCH_FN(relu_attention));
  m.impl("fem_softmax_read", TORCH_FN(fem_softmax_read));
  m.impl("fem_scale_values", TORCH_FN(scale_values));
  m.impl("fem_restore", TORCH_FN(fem_restore));
  m.impl("fem_linear_read", TORCH_FN(fem_linear_read));
  m.impl("fem_gla_read", TORCH_FN(fem_gla_read));
  m.impl("fem_aft_read", TORCH_FN(fem_aft_read));
  m.impl("linear_attention", TORCH_FN(linear_attention));
  m.impl("gla", TORCH_FN(gla));
  m.impl("aft", TORCH_FN(aft));
  m.impl("ssm_scan", TORCH_FN(ssm_scan));
  m.impl("normalised_read", TORCH_FN(normalised));
  m.impl("ela", TORCH_FN(ela));
  m.impl("hypermlp_read", TORCH_FN(hypermlp_read));
  m.impl("mha2nd1st_read", TORCH_FN(mha2nd1st));
  m.impl("light2nd1st_read", TORCH_FN(light2nd1st));
  m.impl("fem_ssm_read", TORCH_FN(fem_ssm_read));
  m.impl("linear_attention_step", TORCH_FN(linear_attention_decode));
  m.impl("gla_step", TORCH_FN(gla_decode));
  m.impl("aft_step", TORCH_FN(aft_decode));
  m.impl("ssm_step", TORCH_FN(ssm_decode));
  m.impl("ela_step", TORCH_FN(ela_decode));
}

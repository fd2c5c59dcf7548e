#include "checks.h"

#include <cmath>
#include <sstream>

#include "seqmix/ops/hypermlp.h"

namespace seqmix::ops {

namespace {
std::string sizes_text(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}
}  // namespace

void check_rank(const at::Tensor& t, const char* op, const char* name, int64_t dims, const char* labels) {
  TORCH_CHECK(t.defined(), op, ": argument ", name, " is missing (expected shape [", labels, "])");
  TORCH_CHECK(t.dim() == dims, op, ": argument ", name, " must have shape [", labels, "] (got ",
              sizes_text(t), ")");
}

void check_same_size(const at::Tensor& a, int64_t dim_a, const at::Tensor& b, int64_t dim_b,
                     const char* op, const char* what) {
  TORCH_CHECK(a.size(dim_a) == b.size(dim_b), op, ": ", what, " disagree (", a.size(dim_a), " vs ",
              b.size(dim_b), ")");
}

void check_same_float_dtype(const char* op, std::initializer_list<at::Tensor> tensors) {
  const at::Tensor& first = *tensors.begin();
  for (const auto& t : tensors) {
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": expects floating-point tensors (got ",
                t.scalar_type(), ")");
    TORCH_CHECK(t.scalar_type() == first.scalar_type(), op, ": all tensors must share one dtype (got ",
                first.scalar_type(), " and ", t.scalar_type(), ")");
  }
}

void check_positive(const char* op, const char* name, const at::Tensor& t) {
  // Fake and meta tensors hold no values (and may have symbolic sizes): only real ones are read.
  if (!t.defined() || t.is_meta() || t.unsafeGetTensorImpl()->is_python_dispatch() || t.numel() == 0) return;
  at::NoGradGuard no_grad;
  const at::Tensor values = t.detach();
  if ((values > 0).all().item<bool>()) return;
  const at::Tensor bad = values.flatten().masked_select((values > 0).logical_not().flatten());
  TORCH_CHECK(false, op, ": ", name, " must be > 0 in every entry (", bad.numel(),
              bad.numel() == 1 ? " entry is not: " : " entries are not, e.g. ", bad[0].item<double>(), ")");
}

void check_state_dtype(const char* op, const at::Tensor& input, std::initializer_list<at::Tensor> state) {
  for (const auto& s : state)
    TORCH_CHECK(!s.defined() || s.scalar_type() == input.scalar_type(), op, ": the decode state is ",
                s.scalar_type(), " but the inputs are ", input.scalar_type(),
                "; make the state with the inputs' dtype (the *_initial_state ops take dtype=)");
}

void check_kernel_inputs(const char* op, std::initializer_list<at::Tensor> tensors) {
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.device().is_cpu(), op, ": runs on CPU tensors only (got a tensor on ", t.device(), ")");
    if (t.scalar_type() != at::kBool)
      TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, op,
                  ": supports float32 and float64 (got ", t.scalar_type(), ")");
  }
}

void check_key_mask(const char* op, const at::Tensor& key_mask, int64_t batch, int64_t keys) {
  if (!key_mask.defined()) return;
  TORCH_CHECK(key_mask.scalar_type() == at::kBool && key_mask.dim() == 2 && key_mask.size(0) == batch &&
                  key_mask.size(1) == keys,
              op, ": key_mask must be bool [B,S] = [", batch, ",", keys, "] (got ", key_mask.scalar_type(), " ",
              key_mask.sizes(), ")");
}

void check_scale(const char* op, double scale) {
  TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite (got ", scale, ")");
}

void check_eps(const char* op, double eps) {
  TORCH_CHECK(eps >= 0, op, ": eps must be >= 0 (got ", eps, ")");
}

void check_state_args(const char* op, std::initializer_list<std::pair<const char*, int64_t>> sizes,
                      const at::TensorOptions& options) {
  for (const auto& size : sizes)
    TORCH_CHECK(size.second >= 0, op, ": ", size.first, " must be >= 0 (got ", size.second, ")");
  const auto dtype = at::typeMetaToScalarType(options.dtype());
  TORCH_CHECK(at::isFloatingType(dtype), op, ": the state needs a floating-point dtype (got ", dtype, ")");
}

void check_attention_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  check_rank(q, op, "q", 4, "B,T,H,dk");
  check_rank(k, op, "k", 4, "B,S,H,dk");
  check_rank(v, op, "v", 4, "B,S,H,dv");
  check_same_float_dtype(op, {q, k, v});
  check_same_size(q, 0, k, 0, op, "batch sizes of q and k");
  check_same_size(k, 0, v, 0, op, "batch sizes of k and v");
  check_same_size(q, 2, k, 2, op, "head counts of q and k");
  check_same_size(k, 2, v, 2, op, "head counts of k and v");
  check_same_size(q, 3, k, 3, op, "head widths of q and k");
  check_same_size(k, 1, v, 1, op, "key lengths of k and v");
  TORCH_CHECK(q.size(1) <= k.size(1), op, ": more queries (", q.size(1), ") than keys (", k.size(1),
              "); queries are the last positions of the key sequence");
}

void check_linear_scan_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& log_decay) {
  check_rank(q, op, "q", 4, "B,T,H,dk");
  check_rank(k, op, "k", 4, "B,T,H,dk");
  check_rank(v, op, "v", 4, "B,T,H,dv");
  check_same_float_dtype(op, {q, k, v});
  TORCH_CHECK(q.sizes() == k.sizes(), op, ": q and k must have the same shape (got ", q.sizes(), " and ",
              k.sizes(), ")");
  TORCH_CHECK(v.sizes().slice(0, 3) == q.sizes().slice(0, 3), op, ": v must share [B,T,H] with q (got ", v.sizes(),
              " and ", q.sizes(), ")");
  if (!log_decay.defined()) return;
  TORCH_CHECK(log_decay.dim() == 3 || log_decay.dim() == 4, op,
              ": log_decay must be [B,T,H] (a decay per head) or [B,T,H,dk] (per key feature) (got ",
              log_decay.sizes(), ")");
  check_same_float_dtype(op, {q, log_decay});
  if (log_decay.dim() == 3) {
    TORCH_CHECK(log_decay.sizes() == q.sizes().slice(0, 3), op, ": log_decay must share [B,T,H] with q (got ",
                log_decay.sizes(), " and ", q.sizes(), ")");
  } else {
    TORCH_CHECK(log_decay.sizes() == q.sizes(), op, ": a per-key log_decay must be [B,T,H,dk], q's shape (got ",
                log_decay.sizes(), " and ", q.sizes(), ")");
  }
}

void check_scan_step_args(const char* op, const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                          const at::Tensor& kv, const at::Tensor& k_sum) {
  check_rank(q_t, op, "q_t", 3, "B,H,dk");
  check_rank(k_t, op, "k_t", 3, "B,H,dk");
  check_rank(v_t, op, "v_t", 3, "B,H,dv");
  check_rank(kv, op, "state.kv", 4, "B,H,F,dv");
  check_rank(k_sum, op, "state.k_sum", 3, "B,H,F");
  TORCH_CHECK(q_t.sizes() == k_t.sizes(), op, ": q_t and k_t must have the same shape (got ", q_t.sizes(), " and ",
              k_t.sizes(), ")");
  TORCH_CHECK(v_t.sizes().slice(0, 2) == q_t.sizes().slice(0, 2), op, ": v_t must share [B,H] with q_t (got ",
              v_t.sizes(), " and ", q_t.sizes(), ")");
  TORCH_CHECK(kv.size(0) == q_t.size(0) && kv.size(1) == q_t.size(1) && kv.size(3) == v_t.size(2), op,
              ": state.kv must be [B,H,F,dv] = [", q_t.size(0), ",", q_t.size(1), ",F,", v_t.size(2), "] (got ",
              kv.sizes(), ")");
  TORCH_CHECK(k_sum.sizes() == kv.sizes().slice(0, 3), op, ": state.k_sum must be [B,H,F] = ", kv.sizes().slice(0, 3),
              " like state.kv (got ", k_sum.sizes(), ")");
  check_state_dtype(op, q_t, {kv, k_sum});
}

void check_state_features_are_keys(const char* op, const at::Tensor& q_t, const at::Tensor& kv) {
  TORCH_CHECK(kv.size(2) == q_t.size(2), op, ": the state holds ", kv.size(2), " key features but q_t has dk = ",
              q_t.size(2));
}

void check_aft_args(const char* op, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  check_rank(k, op, "k", 3, "B,T,C");
  check_rank(v, op, "v", 3, "B,T,C");
  check_same_float_dtype(op, {k, v});
  TORCH_CHECK(k.sizes() == v.sizes(), op, ": k and v must have the same shape (got ", k.sizes(), " and ", v.sizes(), ")");
  if (!mask.defined()) return;
  check_rank(mask, op, "mask", 2, "B,T");
  TORCH_CHECK(mask.scalar_type() == at::kBool, op, ": mask must be bool (true = real token), got ", mask.scalar_type());
  TORCH_CHECK(mask.size(0) == k.size(0) && mask.size(1) == k.size(1), op, ": mask must have shape [B,T] = [",
              k.size(0), ", ", k.size(1), "] (got ", mask.sizes(), ")");
}

void check_ssm_args(const char* op, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                    const at::Tensor& b, const at::Tensor& c) {
  check_rank(u, op, "u", 3, "B,T,C");
  check_rank(delta, op, "delta", 3, "B,T,C");
  check_rank(A, op, "A", 2, "C,N");
  check_rank(b, op, "b", 3, "B,T,N");
  check_rank(c, op, "c", 3, "B,T,N");
  check_same_float_dtype(op, {u, delta, A, b, c});
  TORCH_CHECK(delta.sizes() == u.sizes(), op, ": delta must have the shape of u (got ", delta.sizes(), " and ",
              u.sizes(), ")");
  TORCH_CHECK(b.sizes() == c.sizes(), op, ": b and c must have the same shape (got ", b.sizes(), " and ", c.sizes(),
              ")");
  check_same_size(A, 0, u, 2, op, "channel counts of A and u");
  check_same_size(A, 1, b, 2, op, "state sizes of A and b");
  check_same_size(u, 0, b, 0, op, "batch sizes of u and b");
  check_same_size(u, 1, b, 1, op, "lengths of u and b");
}

namespace {
void check_hyper_mixing(const char* op, const char* side, const at::Tensor& s, const HyperMixing& mix,
                        const at::Tensor& q, int64_t heads, int64_t keys) {
  TORCH_CHECK(s.defined() == mix.defined(), op, ": the ", side,
              " mixing needs both its controls and its parameters (one is missing)");
  if (!mix.defined()) return;
  check_rank(s, op, side, 4, "B,T,Hm,r");
  check_rank(mix.diag, op, "mixing diag", 2, "Hm,Lmax");
  check_rank(mix.U, op, "mixing U", 3, "Hm,Lmax,r");
  check_rank(mix.Vt, op, "mixing Vt", 3, "Hm,r,Lmax");
  check_same_float_dtype(op, {q, s, mix.diag, mix.U, mix.Vt});
  TORCH_CHECK(s.sizes().slice(0, 2) == q.sizes().slice(0, 2) && s.size(2) == heads, op, ": ", side,
              " controls must have shape [B,T,", heads, ",r] (got ", s.sizes(), ")");
  const int64_t lmax = mix.U.size(1), rank = mix.U.size(2);
  TORCH_CHECK(mix.U.size(0) == heads && mix.diag.size(0) == heads && mix.Vt.size(0) == heads &&
                  mix.diag.size(1) == lmax && mix.Vt.size(1) == rank && mix.Vt.size(2) == lmax && s.size(3) == rank,
              op, ": ", side, " mixing parameters disagree (diag ", mix.diag.sizes(), ", U ", mix.U.sizes(), ", Vt ",
              mix.Vt.sizes(), ", controls ", s.sizes(), "; expected [", heads, ",Lmax], [", heads, ",Lmax,r], [",
              heads, ",r,Lmax], [B,T,", heads, ",r])");
  TORCH_CHECK(keys <= lmax, op, ": ", keys, " positions exceed the ", lmax,
              " for which the sequence-mixing parameters are stored (max_len)");
}
}  // namespace

void check_hypermlp_args(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& s1, const HyperMixing& mix1, const at::Tensor& s2,
                         const HyperMixing& mix2, const HyperReadOptions& options) {
  check_rank(q, op, "q", 4, "B,T,Hq,dqk");
  check_rank(k, op, "k", 4, "B,S,Hq,dqk");
  check_rank(v, op, "v", 4, "B,S,H,dvo");
  check_same_float_dtype(op, {q, k, v});
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(2) == q.size(2) && k.size(3) == q.size(3), op,
              ": k must share [B,.,Hq,dqk] with q (got ", k.sizes(), " and ", q.sizes(), ")");
  TORCH_CHECK(v.size(0) == k.size(0) && v.size(1) == k.size(1), op, ": v must share [B,S] with k (got ", v.sizes(),
              " and ", k.sizes(), ")");
  TORCH_CHECK(q.size(1) <= k.size(1), op, ": more queries (", q.size(1), ") than keys (", k.size(1), ")");
  const auto activation = options.activation;
  TORCH_CHECK(activation == HyperActivation::softmax || activation == HyperActivation::relu ||
                  activation == HyperActivation::glu,
              op, ": unknown activation (enum value ", static_cast<int>(activation), "; expected softmax, relu or glu)");
  TORCH_CHECK(options.layout == HyperLayout::lag || options.layout == HyperLayout::forward, op,
              ": unknown layout (enum value ", static_cast<int>(options.layout), "; expected lag or forward)");
  check_eps(op, options.eps);
  check_scale(op, options.scale);
  const int64_t heads = v.size(2);
  const int64_t score_heads = options.activation == HyperActivation::glu ? 2 * heads : heads;
  TORCH_CHECK(q.size(2) == score_heads, op, ": q must have ", score_heads, " heads for ", heads, " value heads",
              options.activation == HyperActivation::glu ? " (glu: a gate and a scale head per value head)" : "",
              " (got ", q.size(2), ")");
  TORCH_CHECK(options.block >= 0, op, ": block must be >= 0 (got ", options.block, ")");
  check_hyper_mixing(op, "s1", s1, mix1, q, score_heads, k.size(1));
  check_hyper_mixing(op, "s2", s2, mix2, q, heads, k.size(1));
}

}  // namespace seqmix::ops

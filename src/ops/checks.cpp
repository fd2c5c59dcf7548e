#include "checks.h"

#include <sstream>

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

void check_kernel_inputs(const char* op, std::initializer_list<at::Tensor> tensors) {
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.device().is_cpu(), op, ": runs on CPU tensors only (got a tensor on ", t.device(), ")");
    if (t.scalar_type() != at::kBool)
      TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, op,
                  ": supports float32 and float64 (got ", t.scalar_type(), ")");
  }
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
  check_rank(log_decay, op, "log_decay", 3, "B,T,H");
  check_same_float_dtype(op, {q, log_decay});
  TORCH_CHECK(log_decay.sizes() == q.sizes().slice(0, 3), op, ": log_decay must share [B,T,H] with q (got ",
              log_decay.sizes(), " and ", q.sizes(), ")");
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

}  // namespace seqmix::ops

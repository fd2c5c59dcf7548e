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

}  // namespace seqmix::ops

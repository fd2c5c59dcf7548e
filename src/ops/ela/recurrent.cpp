// The empty fixed-size decode state of causal ELA (the step itself is the ela_step operator, in declare.cpp).
// Hadamard Exp keeps the state relative to the running max of each key channel, as the fused scan does.
#include <ATen/ATen.h>

#include "../common/checks.h"
#include "../common/torch_op.h"
#include "internal.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {

ElaInitialStateCall::Result ela_initial_state_op(const ElaInitialStateCall& call) {
  const at::TensorOptions options = options_of(call.dtype, call.device);
  check_state_args("ela_initial_state", {{"batch", call.batch}, {"heads", call.heads}, {"dk", call.dk}, {"dv", call.dv}},
                   options);
  const ExactKernel& kernel = exact_kernel(std::string(call.kernel));
  int64_t features = call.dk;
  if (!kernel.exponential)  // the feature width of a polynomial kernel, from one probe row
    features = kernel.query_features(at::zeros({1, call.dk}, options)).size(-1);
  return {at::zeros({call.batch, call.heads, features, call.dv}, options),
          at::zeros({call.batch, call.heads, features}, options),
          kernel.exponential ? at::full({call.batch, call.heads, call.dk}, -1e30, options) : at::empty({0}, options)};
}

}  // namespace seqmix::ops

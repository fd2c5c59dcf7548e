// The common family in the op table and in torch.ops.seqmix: what every linear prior's read shares (the
// normalised read) and the implementation choice itself.
#include "internal.h"
#include "torch_op.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {

std::vector<BadCall> impl_bad_calls();
std::vector<BadCall> prior_read_bad_calls();

namespace {

std::vector<BadCall> common_bad_calls() {
  auto calls = impl_bad_calls();
  for (auto& c : prior_read_bad_calls()) calls.push_back(std::move(c));
  return calls;
}

OpFamily declare_common() {
  return {.name = "common", .bad_calls = common_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_common);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&normalised_read_op>(m, "normalised_read(Tensor numerator, Tensor normaliser, float eps) -> Tensor",
      R"doc(numerator / max(normaliser, eps), the normaliser [B,T,H] broadcast over dv (or [B,T,C] per channel).)doc");
  // The table itself, for Python (seqmix.op_table()).
  m.def("op_table() -> str", [] { return op_table_json(); });
}

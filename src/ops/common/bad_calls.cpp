// The shared pieces' calls with bad arguments (the op table's bad_calls of the family common): each must fail
// with one line naming the op or the argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "bad_call_support.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/prior_read.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> impl_bad_calls() {
  return {
      {"parse_impl: unknown name", [] { ops::parse_impl("fast"); }, "fast"},
      {"parse_impl: capitalised name", [] { ops::parse_impl("Fused"); }, "Fused"},
      {"parse_impl: empty name", [] { ops::parse_impl(""); }, "unknown impl"},
  };
}

std::vector<BadCall> prior_read_bad_calls() {
  torch::manual_seed(8);
  const auto numerator = rnd({kB, kT, kH, kDv}), normaliser = positive({kB, kT, kH});
  const std::string nr = "normalised_read";
  return {
      {nr + ": normaliser of rank 2", [=] { ops::normalised_read(numerator, positive({kB, kT}), 1e-6); }, nr},
      {nr + ": normaliser with another head count",
       [=] { ops::normalised_read(numerator, positive({kB, kT, kH + 1}), 1e-6); }, nr},
      {nr + ": per-channel normaliser with another channel count",
       [=] { ops::normalised_read(rnd({kB, kT, kC}), positive({kB, kT, kC + 1}), 1e-6); }, nr},
      {nr + ": negative eps", [=] { ops::normalised_read(numerator, normaliser, -1.0); }, "eps"},
  };
}

}  // namespace seqmix::ops

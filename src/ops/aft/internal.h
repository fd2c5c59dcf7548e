#pragma once
// What the aft family's files share that include/seqmix/ops/aft.h does not show (it takes an operator's call).
#include "../common/operator_calls.h"
#include "seqmix/ops/aft.h"

namespace seqmix::ops {

// The decode state before the first token, seqmix::aft_initial_state (recurrent.cpp), which the naive twin and the
// state handoff start from too.
AftInitialStateCall::Result aft_initial_state_op(const AftInitialStateCall& call);
// A fresh state for k [B,T,C]: [B,C] each, in k's dtype and on its device.
inline AftState fresh_aft_state(const at::Tensor& k) {
  const auto [numerator, normaliser, key_max] = aft_initial_state_op(
      AftInitialStateCall{.batch = k.size(0), .channels = k.size(2), .dtype = k.scalar_type(), .device = k.device()});
  return {numerator, normaliser, key_max};
}

// The decode step, seqmix::aft_step (recurrent.cpp): declare.cpp registers it and the naive twin (naive.cpp) runs it
// once per token.
AftStepCall::Result aft_step_op(const AftStepCall& call);

}  // namespace seqmix::ops

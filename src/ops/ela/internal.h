#pragma once
// What the ela family's files share that include/seqmix/ops/ela.h does not show (it takes an operator's call).
#include "../common/operator_calls.h"

namespace seqmix::ops {

// The decode state before the first token, seqmix::ela_initial_state (recurrent.cpp), which the state handoff
// (state.cpp) returns for an empty sequence too: kv [B,H,F,dv] and k_sum [B,H,F] zero (F the kernel's feature width),
// and for hadamard_exp key_max [B,H,dk] = -1e30 (empty, [0], for the other kernels).
ElaInitialStateCall::Result ela_initial_state_op(const ElaInitialStateCall& call);

}  // namespace seqmix::ops

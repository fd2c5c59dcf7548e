#pragma once
// What the delta family's files share that include/seqmix/ops/delta.h does not show (it takes an operator's call).
#include "../common/torch_op.h"

namespace seqmix::ops {

// The delta rule continued from a state (state.cpp), which delta_rule_op (declare.cpp) runs for each sequence:
// the read continued from call.kv, call.k_sum (linear attention's state layout; none = zeros) and, when
// call.output_final_state, the state after position T (else undefined): exact, by the error-correction form
// S_t = S_{t-1} + b_t k_t (v_t - S_{t-1}^T k_t)^T. From S_0 the written values are those of a zero start on
// v_t - S_0^T k_t, so the read is q_t^T S_0 plus the zero-start read of those values (and of 1 - z_0 . k_t for the
// normaliser); the final state is read by d_k positions after T that do not write (b = 0, k = 0) with queries
// e_1..e_dk (README.md). One sequence: call.cu_seqlens is not read.
ReadAndState delta_rule_from_state(const DeltaRuleCall& call);

}  // namespace seqmix::ops

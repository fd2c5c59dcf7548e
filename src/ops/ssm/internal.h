#pragma once
// What the ssm family's files share that include/seqmix/ops/ssm.h does not show (it takes an operator's call).
#include "../common/torch_op.h"
#include "seqmix/ops/ssm.h"

namespace seqmix::ops {

// The scan of seqmix::ssm_scan (state.cpp), which declare.cpp registers: (y, final state). It runs the chosen
// implementation from a zero state and continues it from the state h_0 = call.state [B,C,N] (none = zeros) and,
// when call.output_final_state, returns h_T [B,C,N] (else undefined): exact, with D_t = delta_1 + ... + delta_t
// [B,T,C], y_t gains sum_n c_t[n] e^{A D_t} h_0 and h_T = e^{A D_T} h_0 + sum_i e^{A (D_T - D_i)} delta_i b_i u_i
// (every exponent <= 0; B*T*C*N memory); autograd through ATen. Packed (cu_seqlens): one state per sequence,
// [N,C,N_state], in and out.
SsmScanCall::Result ssm_scan_op(const SsmScanCall& call);

// The decode step, seqmix::ssm_step (recurrent.cpp): declare.cpp registers it and the naive twin (naive.cpp) runs it
// once per token.
SsmStepCall::Result ssm_step_op(const SsmStepCall& call);

// ssm_normalised_read (ssm.h) scanning with ssm_scan_op itself rather than through the dispatcher, for an operator
// (fem_ssm_read), which already runs inside it (prior_read.cpp).
at::Tensor ssm_normalised_read_in_operator(const at::Tensor& values, const SsmPriorParameters& prior, double floor,
                                           Impl impl, const at::Tensor& cu_seqlens);

}  // namespace seqmix::ops

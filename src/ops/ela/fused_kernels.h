#pragma once
// The causal Hadamard Exp scan behind ela_fused (fused.cpp), joined by the autograd Function in
// autograd.cpp.
#include <ATen/core/Tensor.h>

#include <vector>

#include "../common/operator_calls.h"

namespace seqmix::ops {

// y [B,T,H,dv]; normaliser [B,T,H] = phi(q_t) . z_t with the shifts applied (always >= 1);
// key_max [B,T,H,dk] = the causal running max of each key channel, what the backward needs.
struct HadamardScanForward {
  at::Tensor y, normaliser, key_max;
};
HadamardScanForward hadamard_scan_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// The CPU kernel of seqmix::_ela_hadamard_backward (autograd.cpp registers it): gradients {dq, dk, dv} from the
// upstream gradient of y, given the forward's outputs (call.y, call.normaliser, call.key_max).
std::vector<at::Tensor> hadamard_scan_backward(const ElaHadamardBackwardCall& call);

}  // namespace seqmix::ops

namespace seqmix::ops {
// The scan as a differentiable op (autograd.cpp): y [B,T,H,dv].
at::Tensor hadamard_scan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
}  // namespace seqmix::ops

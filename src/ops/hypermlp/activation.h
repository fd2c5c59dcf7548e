#pragma once
// The HyperMLP activation on score rows, shared by the blocked read and its dense twin.
#include <ATen/ATen.h>

#include "seqmix/ops/hypermlp.h"

namespace seqmix::ops::hypermlp {

struct Activated {
  at::Tensor a;    // [B,H,...,n] the activated row (zero on hidden slots)
  at::Tensor inv;  // [B,H,...,1] the output scale 1/sqrt(||h||^2 + eps); undefined for softmax
};

// h [B,Hq,...,n], zero on hidden slots; visible [...,n] bool broadcastable to h. relu: a = ReLU(h) and
// inv = 1/||h|| (ReLU o L2Norm = ReLU / ||h||, applied after the linear mixing and read); glu: the first
// H of the 2H heads gate, the last H scale; softmax: over the visible slots.
Activated activate(const at::Tensor& h, const at::Tensor& visible, const HyperReadOptions& options);

}  // namespace seqmix::ops::hypermlp

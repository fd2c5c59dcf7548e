#pragma once
// The inputs of the op families' benchmark cases (their declare.cpp), drawn from ATen's default generator.
#include <ATen/ATen.h>

namespace seqmix::ops::bench_inputs {

// A leaf that takes a gradient.
inline at::Tensor leaf(const at::Tensor& t) { return t.detach().requires_grad_(); }
// N(0, 1) leaves.
inline at::Tensor randn(at::IntArrayRef shape) { return leaf(at::randn(shape)); }
// Non-negative features (a normalised linear read): relu(x) + 1e-6.
inline at::Tensor features(at::IntArrayRef shape) { return leaf(at::relu(at::randn(shape)) + 1e-6); }

}  // namespace seqmix::ops::bench_inputs

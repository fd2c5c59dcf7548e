#pragma once
// Padding that never leaks. A position a mask marks false (padding, or a masked-out key) gets a weight of exactly
// zero, but that is not enough when it holds NaN or inf: the block products multiply it in (0 x NaN = NaN), and so
// do the backward passes, into the real positions' gradients. So the ops first replace the non-finite values at
// masked positions by zeros; a finite value there already adds exactly nothing to any real position's output, and
// is left as it is (so a padded query's own output, which reads its own position when it sees no real key, is
// unchanged for finite inputs).
#include <ATen/core/Tensor.h>

namespace seqmix::ops {

// x [B,S,...] with the non-finite values at the positions where mask [B,S] (bool, true = real) is false set to
// zero; x itself when the mask is undefined. `op` and `name` go into the one-line error for a mask of another shape.
at::Tensor finite_padding(const char* op, const char* name, const at::Tensor& x, const at::Tensor& mask);

// Attention's inputs made finite at masked positions: k, v [B,S,H,d] at the key_mask's false positions, and
// q [B,T,H,d] at the false positions among the last T keys (query t is key t + S - T), so a padded query's NaN
// does not reach the real keys' gradients either.
struct AttentionInputs {
  at::Tensor q, k, v;
};
AttentionInputs finite_masked_positions(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_mask);

}  // namespace seqmix::ops

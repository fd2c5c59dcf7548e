#pragma once
// Padding that never leaks. A position a mask marks false (padding, or a masked-out key) gets a weight of exactly
// zero, but that is not enough when it holds NaN or inf: the block products multiply it in (0 x NaN = NaN), and so
// do the backward passes, into the real positions' gradients. So the ops first replace the non-finite values at
// masked positions by zeros; a finite value there already adds exactly nothing to any real position's output, and
// is left as it is (so a padded query's own output, which reads its own position when it sees no real key, is
// unchanged for finite inputs).
#include <ATen/core/Tensor.h>

#include <vector>

#include "packing.h"

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

// Causal means causal for non-finite values too. A kernel's block products multiply the exactly-zero weight of a
// later key (or, packed, of another sequence's key) by its value, 0 x NaN = NaN, so one NaN or inf at key position
// t would reach the outputs before t. The entry points therefore run through causal_outputs: when a key-side input
// holds a non-finite value (one isfinite pass over them, skipped on torch.compile's fake tensors), the outputs
// before each row's first such position are recomputed from that row's prefix, where every value is finite (and,
// packed, every sequence is computed alone): exactly what those positions get with any finite value there.
// Queries need no check: query t reaches output t alone.

// The part of the inputs an op call covers: batch rows [row, row + rows) and key positions [begin, begin + length)
// of [B,S,...] inputs; the queries [B,T,...] are the last T of the S positions (T = S but for a decode cache).
// rows < 0: the whole input, as given.
struct Window {
  int64_t row, rows, begin, length;
  at::Tensor cu_seqlens;  // the packed offsets over the whole call (only there), else undefined
  // x [B,S,...] cut to the window (undefined stays undefined).
  at::Tensor keys(const at::Tensor& x) const;
  // q [B,T,...] cut to the queries whose key position lies in the window (keys: a [B,S,...] key-side input).
  at::Tensor queries(const at::Tensor& q, const at::Tensor& keys) const;
};
// Per batch row, the first key position at which any of key_side ([B,S,...] each, undefined ones skipped) is not
// finite, S where none is; empty when all are finite or their values cannot be read (fake tensors).
std::vector<int64_t> first_non_finite(const std::vector<at::Tensor>& key_side);
// out [B,T,...] with rows [row, row + 1) and positions [0, prefix.size(1)) replaced by prefix (autograd-safe).
at::Tensor with_prefix(const at::Tensor& out, int64_t row, const at::Tensor& prefix);

// call(window) -> the op's time-major outputs over that window. causal: no query sees a later key. Returns call
// over the whole input, its outputs made independent of non-finite values at later keys and in other packed
// sequences, as described above.
template <class Call>
std::vector<at::Tensor> causal_outputs(bool causal, const std::vector<at::Tensor>& key_side, const at::Tensor& q,
                                       const at::Tensor& cu_seqlens, const Call& call) {
  std::vector<at::Tensor> out = call(Window{0, -1, 0, -1, cu_seqlens});  // checks the shapes
  if (first_non_finite(key_side).empty()) return out;
  const int64_t B = key_side.front().size(0), S = key_side.front().size(1);
  // The outputs o of an unpacked window w, each row's positions before its first non-finite key recomputed from
  // its prefix.
  const auto prefix_safe = [&](const Window& w, std::vector<at::Tensor> o) {
    if (!causal) return o;
    for (int64_t b = 0; b < w.rows; ++b) {
      const Window row{w.row + b, 1, w.begin, w.length, {}};
      std::vector<at::Tensor> keys;
      for (const at::Tensor& k : key_side) keys.push_back(row.keys(k));
      const std::vector<int64_t> first = first_non_finite(keys);
      if (first.empty() || first[0] == w.length) continue;
      const Window prefix{w.row + b, 1, w.begin, first[0], {}};
      if (prefix.queries(q, key_side.front()).size(1) == 0) continue;
      const std::vector<at::Tensor> part = call(prefix);
      for (size_t i = 0; i < o.size(); ++i) o[i] = with_prefix(o[i], b, part[i]);
    }
    return o;
  };
  if (!cu_seqlens.defined()) return prefix_safe(Window{0, B, 0, S, {}}, std::move(out));
  // Packed: every sequence alone (a kernel block that straddles two sequences multiplies one's NaN by a zero
  // weight of the other), each under the causal rule.
  std::vector<std::vector<at::Tensor>> per_sequence;
  for (const Segment& s : sequence_segments(cu_seqlens, S)) {
    if (s.end == s.begin) continue;
    const Window w{0, 1, s.begin, s.end - s.begin, {}};
    per_sequence.push_back(prefix_safe(w, call(w)));
  }
  return join_sequences(per_sequence, std::vector<int64_t>(out.size(), 1));
}

}  // namespace seqmix::ops

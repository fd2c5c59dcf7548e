#pragma once
// Packed variable-length batches: N sequences concatenated along time in one row, [1, total_T, ...], delimited by
// cu_seqlens, int64 [N+1] offsets with cu_seqlens[0] = 0 and cu_seqlens[N] = total_T (flash-linear-attention's
// and flash-attn's convention). An op given cu_seqlens computes each sequence as if it ran alone.
#include <ATen/core/Tensor.h>

#include <vector>

namespace seqmix::ops {

// cu_seqlens's values on the host, where the loops over sequences read them: the tensor itself on the CPU, a copy
// (one synchronisation) from a GPU. cu_seqlens lives on its data's device, as flash-attn's does.
at::Tensor host_offsets(const at::Tensor& cu_seqlens);
// Throws a one-line error naming `op` unless cu_seqlens is int64 [N+1], starts at 0, never decreases and ends at
// `length`, and the batch is 1. The value checks are skipped where values cannot be read (torch.compile's fake
// tensors). Does nothing for an undefined cu_seqlens.
void check_cu_seqlens(const char* op, const at::Tensor& cu_seqlens, int64_t batch, int64_t length);
// Attention-style ops (q [B,T,H,d], k [B,S,H,d]) with cu_seqlens: also no key_mask and no cache (T == S).
void check_packed_attention(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& key_mask,
                            const at::Tensor& cu_seqlens);
// [length] int64: the sequence each position belongs to (a static shape, so it traces under torch.compile).
at::Tensor sequence_ids(const at::Tensor& cu_seqlens, int64_t length);
// The sequences of one row as [begin, end) position ranges, in order: those of cu_seqlens, or the whole row when
// it is undefined (the scans' outer loop; a sequence's state starts from zero at its begin).
struct Segment {
  int64_t begin, end;
};
std::vector<Segment> sequence_segments(const at::Tensor& cu_seqlens, int64_t length);
// The chunks of a chunked scan in order: each sequence cut into chunks of `size` positions from its own begin, so
// no chunk straddles two sequences; the scan's state enters a chunk from the chunk before, or from zero at a
// sequence's first chunk (first_of_sequence).
struct Chunk {
  int64_t begin, end;
  bool first_of_sequence;
};
std::vector<Chunk> sequence_chunks(const at::Tensor& cu_seqlens, int64_t length, int64_t size);
// How many chunk slots a scan's saved states need: ceil(length / size), plus one per packed sequence (each may end
// in a partial chunk); `sequences` is 0 when not packed. Generic over int64_t and c10::SymInt (Meta kernels).
template <class Int>
Int chunk_capacity(const Int& length, const Int& sequences, int64_t size) {
  return (length + size - 1) / size + sequences;
}
// Per position t of [0, length): the first and the last position of its sequence (the kernels' loop bounds).
struct SequenceBounds {
  std::vector<int64_t> first, last;
};
SequenceBounds sequence_bounds(const at::Tensor& cu_seqlens, int64_t length);

// Packed sequences for an op whose kernels do not walk sequence boundaries (ELA, the delta rule, the second-order
// reads, FEM's softmax read): the op runs once per sequence, on its slice, and the outputs are joined. The
// sequences are read from cu_seqlens's values, so this is eager only: under torch.compile (fake tensors) it is a
// one-line error naming `op`.
std::vector<Segment> eager_sequence_segments(const char* op, const at::Tensor& cu_seqlens, int64_t length);
// Output i of every sequence joined along join_dims[i]: 1 for time-major outputs [1,l,...], 0 for per-sequence
// states [1,...] (an undefined output stays undefined).
std::vector<at::Tensor> join_sequences(const std::vector<std::vector<at::Tensor>>& outputs,
                                       c10::IntArrayRef join_dims);
// Runs alone(begin, length, index) -> the outputs of sequence `index` (positions [begin, begin + length)) for
// every sequence of cu_seqlens, and joins them (join_sequences). join_dims is an array view, a braced list at the
// call site: built as a std::vector instead, Debian 12's GCC 12.2 with -march=native on an AVX-512 CPU stored
// {1, 1, 0, 0} as {1, 1, 1, 1} (a vpbroadcastq; the delta rule's packed states came out joined along time).
template <class Alone>
std::vector<at::Tensor> each_sequence_alone(const char* op, const at::Tensor& cu_seqlens, int64_t length,
                                            c10::IntArrayRef join_dims, const Alone& alone) {
  std::vector<std::vector<at::Tensor>> outputs;
  for (const Segment& s : eager_sequence_segments(op, cu_seqlens, length))
    outputs.push_back(alone(s.begin, s.end - s.begin, static_cast<int64_t>(outputs.size())));
  return join_sequences(outputs, join_dims);
}

}  // namespace seqmix::ops

// Packed variable-length batches (packing.h).
#include "packing.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace seqmix::ops {

at::Tensor host_offsets(const at::Tensor& cu_seqlens) { return cu_seqlens.to(at::kCPU).contiguous(); }

void check_cu_seqlens(const char* op, const at::Tensor& cu_seqlens, int64_t batch, int64_t length) {
  if (!cu_seqlens.defined()) return;
  TORCH_CHECK(cu_seqlens.scalar_type() == at::kLong && cu_seqlens.dim() == 1 && cu_seqlens.numel() >= 1, op,
              ": cu_seqlens must be int64 [N+1], the offsets of N packed sequences (got ", cu_seqlens.scalar_type(), " ",
              cu_seqlens.sizes(), ")");
  TORCH_CHECK(batch == 1, op, ": packed sequences (cu_seqlens) take a batch of 1, [1, total_T, ...] (got a batch of ",
              batch, ")");
  if (cu_seqlens.is_meta() || cu_seqlens.unsafeGetTensorImpl()->is_python_dispatch()) return;
  const auto cu = host_offsets(cu_seqlens);
  const int64_t* offsets = cu.data_ptr<int64_t>();
  const int64_t n = cu.numel();
  TORCH_CHECK(offsets[0] == 0 && offsets[n - 1] == length, op, ": cu_seqlens must run from 0 to the packed length ",
              length, " (got ", offsets[0], " to ", offsets[n - 1], ")");
  for (int64_t i = 1; i < n; ++i)
    TORCH_CHECK(offsets[i] >= offsets[i - 1], op, ": cu_seqlens must not decrease (entry ", i, " is ", offsets[i],
                ", after ", offsets[i - 1], ")");
}

void check_packed_attention(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& key_mask,
                            const at::Tensor& cu_seqlens) {
  if (!cu_seqlens.defined()) return;
  TORCH_CHECK(!key_mask.defined(), op, ": give cu_seqlens or key_mask, not both (a packed batch has no padding)");
  TORCH_CHECK(q.size(1) == k.size(1), op, ": packed sequences (cu_seqlens) need as many queries as keys (got ",
              q.size(1), " and ", k.size(1), ")");
  check_cu_seqlens(op, cu_seqlens, q.size(0), q.size(1));
}

at::Tensor sequence_ids(const at::Tensor& cu_seqlens, int64_t length) {
  // The sequence of t is the number of ends cu_seqlens[1..N] at or before t.
  const auto positions = at::arange(length, cu_seqlens.options());
  return at::bucketize(positions, cu_seqlens.slice(0, 1), /*out_int32=*/false, /*right=*/true);
}

std::vector<Segment> sequence_segments(const at::Tensor& cu_seqlens, int64_t length) {
  if (!cu_seqlens.defined()) return {{0, length}};
  const auto cu = host_offsets(cu_seqlens);
  const int64_t* offsets = cu.data_ptr<int64_t>();
  std::vector<Segment> segments;
  for (int64_t s = 0; s + 1 < cu.numel(); ++s) segments.push_back({offsets[s], offsets[s + 1]});
  return segments;
}

std::vector<Chunk> sequence_chunks(const at::Tensor& cu_seqlens, int64_t length, int64_t size) {
  std::vector<Chunk> chunks;
  for (const Segment& sequence : sequence_segments(cu_seqlens, length))
    for (int64_t t0 = sequence.begin; t0 < sequence.end; t0 += size)
      chunks.push_back({t0, std::min(sequence.end, t0 + size), t0 == sequence.begin});
  return chunks;
}

std::vector<Segment> eager_sequence_segments(const char* op, const at::Tensor& cu_seqlens, int64_t length) {
  TORCH_CHECK(!cu_seqlens.is_meta() && !cu_seqlens.unsafeGetTensorImpl()->is_python_dispatch(), op,
              ": with cu_seqlens this op runs once per sequence, which needs the offsets' values: call it eagerly "
              "(outside torch.compile, or under torch.compiler.disable)");
  return sequence_segments(cu_seqlens, length);
}

std::vector<at::Tensor> join_sequences(const std::vector<std::vector<at::Tensor>>& outputs,
                                       c10::IntArrayRef join_dims) {
  std::vector<at::Tensor> joined(join_dims.size());
  for (size_t i = 0; i < join_dims.size(); ++i) {
    std::vector<at::Tensor> parts;
    for (const auto& o : outputs)
      if (o[i].defined()) parts.push_back(o[i]);
    if (!parts.empty()) joined[i] = at::cat(parts, join_dims[i]);
  }
  return joined;
}

SequenceBounds sequence_bounds(const at::Tensor& cu_seqlens, int64_t length) {
  SequenceBounds bounds{std::vector<int64_t>(static_cast<size_t>(length)),
                        std::vector<int64_t>(static_cast<size_t>(length))};
  const auto cu = host_offsets(cu_seqlens);
  const int64_t* offsets = cu.data_ptr<int64_t>();
  for (int64_t s = 0; s + 1 < cu.numel(); ++s)
    for (int64_t t = offsets[s]; t < offsets[s + 1]; ++t) {
      bounds.first[static_cast<size_t>(t)] = offsets[s];
      bounds.last[static_cast<size_t>(t)] = offsets[s + 1] - 1;
    }
  return bounds;
}

}  // namespace seqmix::ops

#pragma once
// The sequence-mixer interface: x [B,T,D] -> y [B,T,D], causal or bidirectional. Causal mixers also
// decode: init_state(batch), then step(x_t, state) per token, and prefill(x, state) for a block of tokens.
// Contract (tested for every mixer): prefill(x[:, :t]) followed by step on each later token equals
// forward(x) at every position.
#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "seqmix/modules/decode_state.h"

namespace seqmix {

class MixerImpl : public torch::nn::Module {
 public:
  MixerImpl(std::string kind, int64_t dim, bool causal);

  // x [B,T,D] -> [B,T,D]
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // An empty decode state for `batch` sequences.
  virtual DecodeState init_state(int64_t batch) const;
  // x_t [B,D] -> y_t [B,D], consuming one token.
  virtual torch::Tensor step(const torch::Tensor& x_t, DecodeState& state);
  // x [B,T,D] continuing from state; equal to T calls of step. The default calls step T times.
  virtual torch::Tensor prefill(const torch::Tensor& x, DecodeState& state);
  // x [B,T,D] with padding_mask [B,T] (bool, true = real token): padded positions leave the support, so
  // outputs at real tokens do not depend on them. The default refuses (not every mixer supports it).
  virtual torch::Tensor forward_masked(const torch::Tensor& x, const torch::Tensor& padding_mask);
  // Packed variable-length sequences: x [1,N,D] holds sequences back to back, cu_seqlens int64 [S+1] their offsets
  // (0 = cu_seqlens[0] <= ... <= cu_seqlens[S] = N, flash-linear-attention's convention); each sequence is mixed
  // as if it ran alone (positions restart at its first token, nothing crosses a boundary). The default runs
  // forward on each sequence's slice; mixers whose ops walk sequence boundaries themselves override it
  // (packs_natively) and make one call for all.
  virtual torch::Tensor forward_packed(const torch::Tensor& x, const torch::Tensor& cu_seqlens);
  virtual bool packs_natively() const { return false; }

  bool is_causal() const { return causal_; }
  int64_t dim() const { return dim_; }
  const std::string& kind() const { return kind_; }

 protected:
  // Checks x is [B,T,D] with this mixer's D; names the mixer in the error.
  void check_input(const torch::Tensor& x) const;
  // Checks x_t is [B,D] and the mixer is causal (bidirectional mixers cannot decode).
  void check_step_input(const torch::Tensor& x_t) const;
  // Throws a clear error when the mixer is bidirectional.
  void check_decodable() const;
  // Checks forward_packed's x [1,N,D] and cu_seqlens; names the mixer in the error.
  void check_packed_input(const torch::Tensor& x, const torch::Tensor& cu_seqlens) const;

 private:
  std::string kind_;
  int64_t dim_;
  bool causal_;
};
using Mixer = std::shared_ptr<MixerImpl>;

// The position of each token within its packed sequence, [1,N] int64 (0 at each sequence's first token): RoPE's
// and learned positions' input for packed sequences.
torch::Tensor packed_positions(const torch::Tensor& cu_seqlens, int64_t length);
// The offsets of the sequences in rows [B,T] whose sequence_starts [B,T] bool marks each sequence's first token
// (every row's first token begins one too), with the rows laid end to end: int64 [S+1] over B*T positions.
torch::Tensor cu_seqlens_of_starts(const torch::Tensor& sequence_starts);

}  // namespace seqmix

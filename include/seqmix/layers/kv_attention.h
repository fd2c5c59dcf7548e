#pragma once
// Multi-head attention that reads a key/value cache: the softmax, ReLU and LightMHA2nd1st mixers. Value
// projection -> the softmax prior's key-value machinery (src/layers/priors/softmax.cpp: q/k projection, RoPE, the
// cache) read through the mixer's attend -> output projection.
#include <torch/nn/modules/linear.h>

#include "seqmix/layers/mixer.h"

namespace seqmix {

class PriorImpl;

struct KVAttentionOptions {
  int64_t dim = 128;
  int64_t heads = 4;
  bool rope = true;
  double rope_theta = 10000.0;
  bool bias = true;
  bool causal = true;
  bool raw_values = false;  // values are the inputs and the read is the output (no W_v, no W_o)
};

class KVAttentionImpl : public MixerImpl {
 public:
  KVAttentionImpl(std::string kind, const KVAttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x) override;
  // One attention call for all sequences where attend_packed is implemented (softmax), else a forward per sequence.
  torch::Tensor forward_packed(const torch::Tensor& x, const torch::Tensor& cu_seqlens) override;
  DecodeState init_state(int64_t batch) const override;
  torch::Tensor step(const torch::Tensor& x_t, DecodeState& state) override;
  // Appends the block's keys and values to the cache and attends from its queries.
  torch::Tensor prefill(const torch::Tensor& x, DecodeState& state) override;

  const KVAttentionOptions& options() const { return options_; }
  torch::nn::Linear out{nullptr};  // null with raw_values (the prior's qkv projects q and k only then)

 protected:
  // q [B,T,H,d], k and v [B,S,H,d], queries are the last T of S positions.
  virtual torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               bool causal) = 0;
  // The same over packed sequences, q, k, v [1,N,H,d] and cu_seqlens [S+1], each attending within itself; only
  // for mixers that say packs_natively().
  virtual torch::Tensor attend_packed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      bool causal, const torch::Tensor& cu_seqlens);

 private:
  torch::Tensor output(const torch::Tensor& read);
  std::shared_ptr<PriorImpl> prior_;
  KVAttentionOptions options_;
  int64_t head_dim_;
};

}  // namespace seqmix

#include "seqmix/models/autoencoder.h"

#include <cmath>

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/modules/init.h"

namespace seqmix {

torch::Tensor AutoEncoderImpl::sinusoidal_positions(int64_t length, int64_t dim) {
  const int64_t half = dim / 2;
  auto j = torch::arange(half, torch::kDouble);
  auto freq = torch::exp(-j * std::log(10000.0) / static_cast<double>(std::max<int64_t>(1, half - 1)));
  auto angle = torch::arange(length, torch::kDouble).unsqueeze(1) * freq.unsqueeze(0);
  auto table = torch::cat({angle.sin(), angle.cos()}, 1);
  if (table.size(1) < dim) table = torch::cat({table, torch::zeros({length, dim - table.size(1)}, torch::kDouble)}, 1);
  return table.to(torch::kFloat);
}

AutoEncoderImpl::AutoEncoderImpl(LanguageModelOptions o, int64_t seq_len) : seq_len_(seq_len) {
  if (o.vocab_size <= 0) throw Error("model autoencoder: needs a token task");
  if (seq_len <= 0) throw Error("model autoencoder: needs the sequence length");
  const int64_t V = o.vocab_size, d = o.dim;
  o.final_norm = false;
  o.output_head = false;
  o.max_len = seq_len;
  encoder_ = register_module("encoder", std::make_shared<LanguageModelImpl>(o));
  norm1_ = register_module("norm1", make_norm("rms", d));
  fc1_ = register_module("fc1", torch::nn::Linear(d, d));
  norm2_ = register_module("norm2", make_norm("rms", d));
  fc2_ = register_module("fc2", torch::nn::Linear(d, d));
  head_norm_ = register_module("head_norm", make_norm("rms", d));
  head_ = register_module("head", torch::nn::Linear(d, V));
  for (auto* l : {&fc1_, &fc2_, &head_}) init_linear(*l);
  positions_ = register_buffer("positions", sinusoidal_positions(seq_len, d));
}

torch::Tensor AutoEncoderImpl::forward(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(1) == seq_len_, "model autoencoder: tokens must have shape [B,", seq_len_,
              "] (got ", tokens.sizes(), ")");
  auto code = encoder_->forward(tokens).select(1, tokens.size(1) - 1);  // [B,d], the last position
  auto x = code.unsqueeze(1) + positions_.unsqueeze(0);                // [B,L,d]
  x = torch::gelu(fc1_(norm1_->forward(x)));
  x = torch::gelu(fc2_(norm2_->forward(x)));
  return head_(head_norm_->forward(x));
}

std::vector<c10::SymInt> AutoEncoderImpl::output_shape(c10::SymIntArrayRef inputs) const {
  return {inputs[0], c10::SymInt(seq_len_), c10::SymInt(head_->options.out_features())};  // [B,L,V]
}

}  // namespace seqmix

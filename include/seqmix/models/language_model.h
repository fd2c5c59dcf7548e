#pragma once
// A GPT-style stack: token embedding (or a projection of real-valued inputs), optional learned positions,
// N blocks of [norm, sequence mixer, norm, channel mixer] joined by a residual scheme, final norm, head.
// Decoding goes through the mixers' own decode paths.
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <functional>

#include <string>
#include <vector>

#include "seqmix/io/spec.h"
#include "seqmix/layers/mixer.h"
#include "seqmix/models/registry.h"
#include "seqmix/models/sequence_model.h"
#include "seqmix/modules/channel_mixer.h"
#include "seqmix/modules/norm.h"

namespace seqmix {

struct LanguageModelOptions {
  int64_t vocab_size = 0;       // > 0: token inputs [B,T] and logits [B,T,V]
  int64_t input_features = 0;   // > 0 (with vocab_size = 0): real inputs [B,T,F]
  int64_t output_features = 0;  // with real inputs: outputs [B,T,O]
  int64_t dim = 128;
  int64_t layers = 2;
  std::vector<MixerSpec> mixers = {"softmax"};  // spec per layer, cycled over the layers
  ChannelMixerSpec channel_mixer = "swiglu";      // channel-mixer spec, or "none"
  std::string norm = "rms";                       // rms | layer
  ResidualSpec residual = "prenorm";
  bool final_norm = true;
  bool tie_embeddings = false;
  bool head_bias = true;
  bool output_head = true;  // false: forward returns the final hidden state [B,T,D]
  std::string position = "none";  // none | learned (absolute, needs max_len)
  int64_t max_len = 0;
  double embedding_dropout = 0.0;  // on token (+ position) embeddings, training mode only
};

// The "lm" model spec ("lm:dim=128,layers=2,channel=swiglu"): its options bound to LanguageModelOptions (the
// model registry's declaration of lm), and an lm spec read into options (sizes of inputs and outputs come from the
// task, mixers from --mixer; the other fields keep their values).
std::vector<Field<LanguageModelOptions>> language_model_fields();
void apply_model_spec(const std::string& spec, LanguageModelOptions& options);

// One block: [norm, sequence mixer, norm, channel mixer].
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const LanguageModelOptions& options, int64_t layer);
  Norm mixer_norm, channel_norm;  // channel_norm is null without a channel mixer or under Hyper-Link
  Mixer mixer;
  ChannelMixer channel;
  Mixer lobe;  // the Memory Lobe (Hyper-Link with lobe != none), else null
};

struct LanguageModelState {
  std::vector<DecodeState> mixers;
  std::vector<DecodeState> lobes;  // per block (empty without a Memory Lobe)
  int64_t position = 0;
};

struct Sampling {
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = whole vocabulary
  uint64_t seed = 0;
};

class LanguageModelImpl : public SequenceModelImpl {
 public:
  explicit LanguageModelImpl(const LanguageModelOptions& options);

  // tokens [B,T] (int64) -> logits [B,T,V]; or features [B,T,F] -> outputs [B,T,O].
  torch::Tensor forward(const torch::Tensor& inputs) override;
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override;
  // The rows laid end to end as one packed row, [1,B*T], the mixers reading each sequence alone (forward_packed),
  // positions restarting at each sequence; the other sublayers act per token.
  torch::Tensor forward_packed(const torch::Tensor& inputs, const torch::Tensor& sequence_starts) override;
  // The final hidden state [B,T,D] (after the final norm when enabled).
  torch::Tensor hidden(const torch::Tensor& inputs);
  // The channel mixers' auxiliary losses of the last forward, summed (MoE load balance); undefined if none.
  torch::Tensor auxiliary_loss() const override;

  LanguageModelState init_state(int64_t batch) const;
  // inputs [B,T] or [B,T,F] continuing from state -> outputs for those positions.
  torch::Tensor prefill(const torch::Tensor& inputs, LanguageModelState& state);
  // one position: tokens [B] or features [B,F] -> [B,V] or [B,O].
  torch::Tensor step(const torch::Tensor& inputs_t, LanguageModelState& state);
  // Autoregressive continuation of prompt [B,T0] by new_tokens tokens -> [B,T0+new_tokens].
  torch::Tensor generate(const torch::Tensor& prompt, int64_t new_tokens, const Sampling& sampling);

  const LanguageModelOptions& options() const { return options_; }
  const std::vector<std::shared_ptr<BlockImpl>>& blocks() const { return blocks_; }

 private:
  torch::Tensor embed(const torch::Tensor& inputs, int64_t offset);
  // Embedding at per-token positions [1 or B,T] (packed sequences), checked by the caller against max_len.
  torch::Tensor embed_at(const torch::Tensor& inputs, const torch::Tensor& positions);
  // final norm, then the output projection
  torch::Tensor head(const torch::Tensor& h);
  torch::Tensor tied_projection(const torch::Tensor& z);
  // Runs the residual scheme with mixer sublayers given by mix(layer, normed_input) and Memory Lobes by
  // lobe(layer, flow) (forward, prefill and step differ only in these two).
  using LayerFn = std::function<torch::Tensor(size_t, const torch::Tensor&)>;
  torch::Tensor run_blocks(const torch::Tensor& x, const LayerFn& mix, const LayerFn& lobe);
  void check_inputs(const torch::Tensor& inputs, bool one_step) const;

  LanguageModelOptions options_;
  torch::nn::Embedding token_embedding{nullptr}, position_embedding{nullptr};
  torch::nn::Linear input_projection{nullptr}, output_head{nullptr};
  torch::Tensor tied_head_bias_;
  std::vector<std::shared_ptr<BlockImpl>> blocks_;
  Norm final_norm_;
  ResidualScheme residual_;
};
TORCH_MODULE(LanguageModel);

}  // namespace seqmix

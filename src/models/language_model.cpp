#include "seqmix/models/language_model.h"

#include <torch/torch.h>

#include <iostream>

#include "seqmix/io/error.h"
#include "seqmix/modules/init.h"

namespace seqmix {

std::vector<Field<LanguageModelOptions>> language_model_fields() {
  using O = LanguageModelOptions;
  return {Field<O>::integer("dim", &O::dim, "model width", 1),
          Field<O>::integer("layers", &O::layers, "number of blocks", 1, 4096),
          Field<O>::spec("channel", &O::channel_mixer,
                         "channel mixer of every block: swiglu, mlp, moe (a spec, e.g. (moe:experts=4)) or none"),
          Field<O>::choice("norm", &O::norm, std::vector<std::string>{"rms", "layer"}, "normalisation layers"),
          Field<O>::spec("residual", &O::residual, "residual scheme"),
          Field<O>::flag("final_norm", &O::final_norm, "normalise before the head"),
          Field<O>::flag("tie", &O::tie_embeddings, "tie the output head to the token embedding"),
          Field<O>::flag("head_bias", &O::head_bias, "bias in the output head"),
          Field<O>::choice("pos", &O::position, std::vector<std::string>{"none", "learned"},
                           "absolute position embedding"),
          Field<O>::real("dropout", &O::embedding_dropout, "dropout on the embeddings while training (zoology: 0.1)",
                         0.0, 0.999999)};
}

void apply_model_spec(const std::string& spec, LanguageModelOptions& o) {
  const Spec parsed = Spec::parse(spec);
  if (parsed.name != "lm") throw Error("unknown model '" + parsed.name + "'; valid models: lm");
  const auto fields = language_model_fields();
  const Options options("model lm", option_infos(fields), parsed);
  for (const auto& f : fields) f.read(options, o);
}

BlockImpl::BlockImpl(const LanguageModelOptions& o, int64_t layer) {
  const MixerSpec& spec = o.mixers[static_cast<size_t>(layer) % o.mixers.size()];
  mixer_norm = register_module("mixer_norm", make_norm(o.norm, o.dim));
  mixer = register_module("mixer", build_mixer(spec, MixerContext{o.dim, o.max_len}));
  channel = build_channel_mixer(o.channel_mixer, o.dim);
  const bool hyper_link = o.residual.name() == "hyperlink";  // its channel mixer reads a unnormalised
  if (channel) {
    if (!hyper_link) channel_norm = register_module("channel_norm", make_norm(o.norm, o.dim));
    register_module("channel", channel);
  }
  if (Mixer memory_lobe = build_memory_lobe(o.residual, o.dim, mixer->is_causal()))
    lobe = register_module("lobe", memory_lobe);
}

LanguageModelImpl::LanguageModelImpl(const LanguageModelOptions& o) : options_(o) {
  if ((o.vocab_size > 0) == (o.input_features > 0))
    throw Error("model: give exactly one of a vocabulary size (token inputs) or an input feature count");
  if (o.input_features > 0 && o.output_features <= 0 && o.output_head)
    throw Error("model: real-valued inputs need an output feature count");
  if (o.dim <= 0 || o.layers <= 0) throw Error("model: dim and layers must be positive");
  if (o.mixers.empty()) throw Error("model: at least one mixer spec is needed");
  if (o.tie_embeddings && o.vocab_size <= 0) throw Error("model: tie=1 needs token inputs");

  if (o.vocab_size > 0) {
    token_embedding = register_module("token_embedding", torch::nn::Embedding(o.vocab_size, o.dim));
    torch::NoGradGuard no_grad;
    token_embedding->weight.normal_(0.0, 0.02);
  } else {
    input_projection = register_module("input_projection", torch::nn::Linear(o.input_features, o.dim));
    init_linear(input_projection);
  }
  if (o.position == "learned") {
    if (o.max_len <= 0) throw Error("model: pos=learned needs the maximum sequence length");
    position_embedding = register_module("position_embedding", torch::nn::Embedding(o.max_len, o.dim));
    torch::NoGradGuard no_grad;
    position_embedding->weight.normal_(0.0, 0.02);
  } else if (o.position != "none") {
    throw Error("model: unknown position embedding '" + o.position + "'; valid: none, learned");
  }

  auto block_list = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < o.layers; ++l) {
    blocks_.push_back(std::make_shared<BlockImpl>(o, l));
    block_list->push_back(blocks_.back());
  }
  const int64_t sublayers_per_block = blocks_.front()->channel ? 2 : 1;
  const auto& first = blocks_.front();
  if (first->lobe && !first->lobe->is_causal() && first->mixer->is_causal())
    std::cerr << "warning: residual " << o.residual.source
              << ": the bidirectional Memory Lobe lets this causal model see future tokens (the ELA paper's "
                 "setting); use lobe=causal for an honest language model\n";
  residual_ = register_module("residual", build_residual(o.residual, o.layers, sublayers_per_block));
  if (o.final_norm) final_norm_ = register_module("final_norm", make_norm(o.norm, o.dim));

  const int64_t out_size = o.vocab_size > 0 ? o.vocab_size : o.output_features;
  if (!o.output_head) {
    if (o.tie_embeddings) throw Error("model: tie=1 needs an output head");
  } else if (o.tie_embeddings) {
    if (o.head_bias) tied_head_bias_ = register_parameter("head_bias", torch::zeros({out_size}));
  } else {
    output_head = register_module(
        "output_head", torch::nn::Linear(torch::nn::LinearOptions(o.dim, out_size).bias(o.head_bias)));
    init_linear(output_head);
  }
}

void LanguageModelImpl::check_inputs(const torch::Tensor& inputs, bool one_step) const {
  const int64_t dims = one_step ? 1 : 2;
  if (options_.vocab_size > 0) {
    TORCH_CHECK(inputs.dim() == dims && inputs.scalar_type() == torch::kLong, "model: token inputs must be int64 [",
                one_step ? "B" : "B,T", "] (got ", inputs.scalar_type(), " ", inputs.sizes(), ")");
    if (inputs.numel() > 0) {
      const int64_t lo = inputs.min().item<int64_t>(), hi = inputs.max().item<int64_t>();
      TORCH_CHECK(lo >= 0 && hi < options_.vocab_size, "model: token ids must lie in [0, ", options_.vocab_size,
                  ") (got ", lo, "..", hi, ")");
    }
  } else {
    TORCH_CHECK(inputs.dim() == dims + 1 && inputs.size(-1) == options_.input_features,
                "model: real inputs must have shape [", one_step ? "B," : "B,T,", options_.input_features,
                "] (got ", inputs.sizes(), ")");
  }
}

torch::Tensor LanguageModelImpl::embed(const torch::Tensor& inputs, int64_t offset) {
  const int64_t T = inputs.size(1);
  if (position_embedding)
    TORCH_CHECK(offset + T <= options_.max_len, "model: position ", offset + T - 1,
                " is beyond the learned position table (max_len ", options_.max_len, ")");
  return embed_at(inputs, torch::arange(offset, offset + T, inputs.options().dtype(torch::kLong)).unsqueeze(0));
}

torch::Tensor LanguageModelImpl::embed_at(const torch::Tensor& inputs, const torch::Tensor& positions) {
  auto x = options_.vocab_size > 0 ? token_embedding(inputs) : input_projection(inputs);
  if (position_embedding) x = x + position_embedding(positions);
  if (options_.embedding_dropout > 0 && is_training()) x = torch::dropout(x, options_.embedding_dropout, true);
  return x;
}

torch::Tensor LanguageModelImpl::head(const torch::Tensor& h) {
  auto z = final_norm_ ? final_norm_->forward(h) : h;
  if (!options_.output_head) return z;
  return options_.tie_embeddings ? tied_projection(z) : output_head(z);
}

torch::Tensor LanguageModelImpl::tied_projection(const torch::Tensor& z) {
  auto logits = torch::matmul(z, token_embedding->weight.t());
  return tied_head_bias_.defined() ? logits + tied_head_bias_ : logits;
}

torch::Tensor LanguageModelImpl::auxiliary_loss() const {
  torch::Tensor total;
  for (const auto& b : blocks_) {
    if (!b->channel) continue;
    auto aux = b->channel->auxiliary_loss();
    if (aux.defined()) total = total.defined() ? total + aux : aux;
  }
  return total;
}

torch::Tensor LanguageModelImpl::run_blocks(const torch::Tensor& x, const LayerFn& mix, const LayerFn& lobe) {
  std::vector<BlockSublayers> subs;
  subs.reserve(blocks_.size());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    BlockImpl* b = blocks_[l].get();
    BlockSublayers s;
    s.mixer = [b, l, &mix](const torch::Tensor& z) { return mix(l, b->mixer_norm->forward(z)); };
    s.raw_mixer = [l, &mix](const torch::Tensor& z) { return mix(l, z); };
    s.mixer_norm = [b](const torch::Tensor& z) { return b->mixer_norm->forward(z); };
    if (b->channel) {
      s.raw_channel = [b](const torch::Tensor& z) { return b->channel->forward(z); };
      if (b->channel_norm) {
        s.channel = [b](const torch::Tensor& z) { return b->channel->forward(b->channel_norm->forward(z)); };
        s.channel_norm = [b](const torch::Tensor& z) { return b->channel_norm->forward(z); };
      }
    }
    if (b->lobe) s.lobe = [l, &lobe](const torch::Tensor& z) { return lobe(l, z); };
    subs.push_back(std::move(s));
  }
  return residual_->forward(x, subs);
}

torch::Tensor LanguageModelImpl::hidden(const torch::Tensor& inputs) {
  check_inputs(inputs, false);
  auto h = run_blocks(
      embed(inputs, 0), [this](size_t l, const torch::Tensor& z) { return blocks_[l]->mixer->forward(z); },
      [this](size_t l, const torch::Tensor& z) { return blocks_[l]->lobe->forward(z); });
  return final_norm_ ? final_norm_->forward(h) : h;
}

torch::Tensor LanguageModelImpl::forward(const torch::Tensor& inputs) {
  auto z = hidden(inputs);
  if (!options_.output_head) return z;
  return options_.tie_embeddings ? tied_projection(z) : output_head(z);
}

torch::Tensor LanguageModelImpl::forward_packed(const torch::Tensor& inputs, const torch::Tensor& sequence_starts) {
  check_inputs(inputs, false);
  TORCH_CHECK(sequence_starts.dim() == 2 && sequence_starts.size(0) == inputs.size(0) &&
                  sequence_starts.size(1) == inputs.size(1) && sequence_starts.scalar_type() == torch::kBool,
              "model: sequence_starts must be bool [B,T] = [", inputs.size(0), ",", inputs.size(1), "] (got ",
              sequence_starts.scalar_type(), " ", sequence_starts.sizes(), ")");
  TORCH_CHECK(sequence_starts.device() == inputs.device(), "model: sequence_starts must be on the inputs' device, ",
              inputs.device(), " (got ", sequence_starts.device(), ")");
  const int64_t B = inputs.size(0), T = inputs.size(1);
  if (B * T == 0) return forward(inputs);
  const auto cu_seqlens = cu_seqlens_of_starts(sequence_starts);
  const auto positions = packed_positions(cu_seqlens, B * T).view({B, T});
  if (position_embedding) {
    const int64_t last = positions.max().item<int64_t>();  // the longest packed sequence
    TORCH_CHECK(last < options_.max_len, "model: position ", last, " is beyond the learned position table (max_len ",
                options_.max_len, ")");
  }
  // A mixer sees the rows as one packed row [1,B*T,D]; norms, channel mixers and residuals act per token.
  const auto packed = [&cu_seqlens, B, T](const Mixer& m, const torch::Tensor& z) {
    return m->forward_packed(z.reshape({1, B * T, z.size(2)}), cu_seqlens).view({B, T, z.size(2)});
  };
  auto h = run_blocks(
      embed_at(inputs, positions), [&](size_t l, const torch::Tensor& z) { return packed(blocks_[l]->mixer, z); },
      [&](size_t l, const torch::Tensor& z) { return packed(blocks_[l]->lobe, z); });
  return head(h);
}

LanguageModelState LanguageModelImpl::init_state(int64_t batch) const {
  LanguageModelState s;
  for (const auto& b : blocks_) {
    s.mixers.push_back(b->mixer->init_state(batch));
    if (b->lobe && !b->lobe->is_causal())
      throw Error("model: the bidirectional Memory Lobe (lobe=bidirectional) reads future tokens and cannot "
                  "decode token by token; use lobe=causal");
    s.lobes.push_back(b->lobe ? b->lobe->init_state(batch) : DecodeState{});
  }
  return s;
}

torch::Tensor LanguageModelImpl::prefill(const torch::Tensor& inputs, LanguageModelState& state) {
  check_inputs(inputs, false);
  auto h = run_blocks(
      embed(inputs, state.position),
      [this, &state](size_t l, const torch::Tensor& z) { return blocks_[l]->mixer->prefill(z, state.mixers[l]); },
      [this, &state](size_t l, const torch::Tensor& z) { return blocks_[l]->lobe->prefill(z, state.lobes[l]); });
  state.position += inputs.size(1);
  return head(h);
}

torch::Tensor LanguageModelImpl::step(const torch::Tensor& inputs_t, LanguageModelState& state) {
  check_inputs(inputs_t, true);
  auto h = run_blocks(
      embed(inputs_t.unsqueeze(1), state.position),
      [this, &state](size_t l, const torch::Tensor& z) {
        return blocks_[l]->mixer->step(z.squeeze(1), state.mixers[l]).unsqueeze(1);
      },
      [this, &state](size_t l, const torch::Tensor& z) {
        return blocks_[l]->lobe->step(z.squeeze(1), state.lobes[l]).unsqueeze(1);
      });
  state.position += 1;
  return head(h).squeeze(1);
}

torch::Tensor LanguageModelImpl::generate(const torch::Tensor& prompt, int64_t new_tokens, const Sampling& sampling) {
  if (options_.vocab_size <= 0) throw Error("model: generate needs a token model");
  TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) >= 1, "generate: prompt must be int64 [B,T] with T >= 1 (got ",
              prompt.sizes(), ")");
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(sampling.seed);
  auto state = init_state(prompt.size(0));
  auto last = prefill(prompt, state).select(1, prompt.size(1) - 1);  // [B,V]
  std::vector<torch::Tensor> out{prompt};
  for (int64_t i = 0; i < new_tokens; ++i) {
    torch::Tensor next;
    if (sampling.temperature <= 0) {
      next = last.argmax(-1);
    } else {
      auto logits = last.to(torch::kDouble) / sampling.temperature;
      if (sampling.top_k > 0 && sampling.top_k < logits.size(-1)) {
        auto kth = std::get<0>(logits.topk(sampling.top_k, -1)).select(-1, sampling.top_k - 1).unsqueeze(-1);
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
      }
      // Drawn on the CPU with the seeded CPU generator, so a seed gives the same text on every device.
      next = torch::multinomial(torch::softmax(logits, -1).cpu(), 1, false, gen).squeeze(-1).to(last.device());
    }
    out.push_back(next.unsqueeze(1));
    if (i + 1 < new_tokens) last = step(next, state);
  }
  return torch::cat(out, 1);
}

std::vector<c10::SymInt> LanguageModelImpl::output_shape(c10::SymIntArrayRef inputs) const {
  const int64_t width = !options_.output_head ? options_.dim
                        : options_.vocab_size > 0 ? options_.vocab_size
                                                  : options_.output_features;
  return {inputs[0], inputs[1], c10::SymInt(width)};  // [B,T,V], [B,T,O] or [B,T,D]
}

}  // namespace seqmix

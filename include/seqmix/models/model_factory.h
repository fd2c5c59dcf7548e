#pragma once
// Builds a model from its spec around the mixers, sized by the task:
//   lm           GPT-style stack (MAD's language-model backbone)
//   autoencoder  MAD's compression backbone: the stack encodes, its last position is decoded by an MLP
//   probe        a single mixer read at the last position (the FEM paper's argmax toy)
//   forecaster   the stack over the time steps of a window, a Linear head to the whole forecast (ett)
//   dlinear      DLinear's trend/seasonal Linears over time (ett); it takes no sequence mixer
#include <string>
#include <vector>

#include "seqmix/io/declaration.h"
#include "seqmix/io/spec.h"
#include "seqmix/layers/mixer_spec.h"
#include "seqmix/models/sequence_model.h"

namespace seqmix {

struct ModelContext {
  int64_t vocab_size = 0;
  int64_t input_features = 0;
  int64_t output_features = 0;
  int64_t seq_len = 0;
  int64_t output_len = 0;  // > 0: forecasts of output_len rows after the input (Task::output_len)
  std::vector<MixerSpec> mixers;
};

// Every model's declaration (src/models/model_factory.cpp), in `seqmix list` order.
using ModelDeclaration = Declaration<SequenceModel, const ModelContext&>;
const std::vector<ModelDeclaration>& model_declarations();
const std::vector<ComponentInfo>& model_infos();
// A model spec parsed once ("lm:dim=256,channel=(moe:experts=4)"): its options and the specs inside them (channel
// mixer, residual scheme) validated and typed; made from text, it parses it.
struct ModelSpec : ParsedSpec<SequenceModel, const ModelContext&> {
  ModelSpec(const std::string& text);                            // NOLINT(google-explicit-constructor)
  ModelSpec(const char* text) : ModelSpec(std::string(text)) {}  // NOLINT(google-explicit-constructor)
};
SequenceModel build_model(const ModelSpec& spec, const ModelContext& context);
// Whether the model is built around the --mixer specs (dlinear has no sequence mixer).
bool model_takes_mixers(const ModelSpec& spec);

}  // namespace seqmix

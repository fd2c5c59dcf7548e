#pragma once
// Builds a model from its spec around the mixers, sized by the task:
//   lm           GPT-style stack (MAD's language-model backbone)
//   autoencoder  MAD's compression backbone: the stack encodes, its last position is decoded by an MLP
//   probe        a single mixer read at the last position (the FEM paper's argmax toy)
//   forecaster   the stack over the time steps of a window, a Linear head to the whole forecast (ett)
//   dlinear      DLinear's trend/seasonal Linears over time (ett); it takes no sequence mixer
#include <string>
#include <vector>

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

const std::vector<ComponentInfo>& model_infos();
SequenceModel build_model(const std::string& spec, const ModelContext& context);
// Whether the model named by spec is built around the --mixer specs (dlinear has no sequence mixer).
bool model_takes_mixers(const std::string& spec);

}  // namespace seqmix

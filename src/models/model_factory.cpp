#include "seqmix/models/model_factory.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/models/autoencoder.h"
#include "seqmix/models/language_model.h"
#include "seqmix/models/probe_model.h"
#include "seqmix/models/registry.h"

namespace seqmix {
namespace {

ComponentInfo autoencoder_info() {
  return {"autoencoder",
          "MAD's compression backbone: the block stack encodes, its last position is decoded per position by an MLP",
          {OptionInfo::integer("dim", 128, "model width", 2), OptionInfo::integer("layers", 2, "number of blocks", 1),
           OptionInfo::text("channel", "swiglu", "channel mixer of every block: swiglu, mlp, moe (a spec, e.g. (moe:experts=4)) or none"),
           OptionInfo::choice("norm", "rms", {"rms", "layer"}, "normalisation layers of the encoder"),
           OptionInfo::text("residual", "prenorm", "residual scheme")}};
}

}  // namespace

const std::vector<ComponentInfo>& model_infos() {
  static const std::vector<ComponentInfo> infos = {
      language_model_info(), autoencoder_info(),
      {"probe", "one sequence mixer on the raw inputs, read at the last position (no embedding, no MLP)", {}}};
  return infos;
}

SequenceModel build_model(const std::string& spec, const ModelContext& c) {
  const Options o = component_options(model_infos(), "model", spec);
  const std::string name = Spec::parse(spec).name;
  if (c.mixers.empty()) throw Error("model " + name + ": no mixer given");
  if (name == "probe") {
    if (c.input_features <= 0) throw Error("model probe: needs a task with real-valued inputs (e.g. argmax)");
    if (c.mixers.size() != 1) throw Error("model probe: takes exactly one mixer");
    if (c.output_features != c.input_features)
      throw Error("model probe: the task's output width must equal its input width");
    return std::make_shared<ProbeModelImpl>(build_mixer(c.mixers[0], MixerContext{c.input_features, c.seq_len, true}));
  }
  LanguageModelOptions lm;
  lm.vocab_size = c.vocab_size;
  lm.input_features = c.input_features;
  lm.output_features = c.output_features;
  lm.max_len = c.seq_len;
  lm.mixers = c.mixers;
  if (name == "lm") {
    apply_model_spec(spec, lm);
    return std::make_shared<LanguageModelImpl>(lm);
  }
  lm.dim = o.integer("dim");
  lm.layers = o.integer("layers");
  lm.channel_mixer = o.text("channel");
  lm.norm = o.text("norm");
  lm.residual = o.text("residual");
  return std::make_shared<AutoEncoderImpl>(lm, c.seq_len);
}

}  // namespace seqmix

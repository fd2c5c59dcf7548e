#include "seqmix/models/model_factory.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/models/autoencoder.h"
#include "seqmix/models/dlinear.h"
#include "seqmix/models/forecaster.h"
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

ComponentInfo forecaster_info() {
  return {"forecaster",
          "time-series forecaster: instance-normalised windows, the block stack over time steps, a Linear from the "
          "last position to every forecast",
          {OptionInfo::integer("dim", 64, "model width", 2), OptionInfo::integer("layers", 2, "number of blocks", 1),
           OptionInfo::text("channel", "swiglu", "channel mixer of every block: swiglu, mlp, moe (a spec) or none"),
           OptionInfo::choice("norm", "rms", {"rms", "layer"}, "normalisation layers"),
           OptionInfo::text("residual", "prenorm", "residual scheme"),
           OptionInfo::choice("pos", "none", {"none", "learned"}, "absolute position embedding"),
           OptionInfo::flag("instance_norm", true, "normalise each window per channel and undo it on the forecast (RevIN)")}};
}

ComponentInfo dlinear_info() {
  return {"dlinear",
          "DLinear: moving-average trend + seasonal remainder, one Linear over time each, shared by the channels "
          "(takes no mixer)",
          {OptionInfo::integer("kernel", 25, "moving-average window (odd)", 1)}};
}

// Models that forecast [B, horizon, C] from a window; every other model emits per input position.
bool is_forecasting_model(const std::string& name) { return name == "forecaster" || name == "dlinear"; }

}  // namespace

bool model_takes_mixers(const std::string& spec) { return Spec::parse(spec).name != "dlinear"; }

const std::vector<ComponentInfo>& model_infos() {
  static const std::vector<ComponentInfo> infos = {
      language_model_info(), autoencoder_info(),
      {"probe", "one sequence mixer on the raw inputs, read at the last position (no embedding, no MLP)", {}},
      forecaster_info(), dlinear_info()};
  return infos;
}

SequenceModel build_model(const std::string& spec, const ModelContext& c) {
  const Options o = component_options(model_infos(), "model", spec);
  const std::string name = Spec::parse(spec).name;
  if (c.output_len > 0 && !is_forecasting_model(name))
    throw Error("model " + name +
                " emits one output per input position; a forecasting task needs model forecaster or dlinear");
  if (c.output_len <= 0 && is_forecasting_model(name))
    throw Error("model " + name + " forecasts the rows after its input window; it needs a forecasting task (e.g. ett)");
  if (name == "dlinear") {
    if (!c.mixers.empty()) throw Error("model dlinear takes no sequence mixer");
    if (c.output_features != c.input_features) throw Error("model dlinear: the task must forecast the channels it reads");
    return std::make_shared<DLinearImpl>(c.seq_len, c.output_len, c.input_features, o.integer("kernel"));
  }
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
  if (name == "forecaster") {
    if (c.output_features != c.input_features) throw Error("model forecaster: the task must forecast the channels it reads");
    ForecasterOptions f;
    f.stack = lm;
    f.stack.dim = o.integer("dim");
    f.stack.layers = o.integer("layers");
    f.stack.channel_mixer = o.text("channel");
    f.stack.norm = o.text("norm");
    f.stack.residual = o.text("residual");
    f.stack.position = o.text("pos");
    f.horizon = c.output_len;
    f.instance_norm = o.flag("instance_norm");
    return std::make_shared<ForecasterImpl>(f);
  }
  lm.dim = o.integer("dim");
  lm.layers = o.integer("layers");
  lm.channel_mixer = o.text("channel");
  lm.norm = o.text("norm");
  lm.residual = o.text("residual");
  return std::make_shared<AutoEncoderImpl>(lm, c.seq_len);
}

}  // namespace seqmix

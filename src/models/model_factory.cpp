#include "seqmix/models/model_factory.h"

#include <torch/torch.h>

#include "seqmix/io/built_within_limits.h"
#include "seqmix/io/error.h"
#include "seqmix/models/autoencoder.h"
#include "seqmix/models/dlinear.h"
#include "seqmix/models/forecaster.h"
#include "seqmix/models/language_model.h"
#include "seqmix/models/probe_model.h"
#include "seqmix/models/registry.h"
#include "seqmix/models/vit.h"

namespace seqmix {
namespace {

// The options every model on the block stack shares: width, depth, channel mixer, norm, residual scheme.
std::vector<OptionInfo> stack_options(int64_t dim, int64_t layers, const char* channel, const char* channel_meaning,
                                      const char* norm, const char* norm_meaning) {
  return {OptionInfo::integer("dim", dim, "model width", 2), OptionInfo::integer("layers", layers, "number of blocks", 1, 4096),
          OptionInfo::text("channel", channel, channel_meaning),
          OptionInfo::choice("norm", norm, {"rms", "layer"}, norm_meaning),
          OptionInfo::text("residual", "prenorm", "residual scheme")};
}

// Those options, read into the stack's settings.
void read_stack_options(const Options& o, LanguageModelOptions& stack) {
  stack.dim = o.integer("dim");
  stack.layers = o.integer("layers");
  stack.channel_mixer = o.text("channel");
  stack.norm = o.text("norm");
  stack.residual = o.text("residual");
}

std::vector<OptionInfo> operator+(std::vector<OptionInfo> a, const std::vector<OptionInfo>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

ComponentInfo autoencoder_info() {
  return {"autoencoder",
          "MAD's compression backbone: the block stack encodes, its last position is decoded per position by an MLP",
          stack_options(128, 2, "swiglu", "channel mixer of every block: swiglu, mlp, moe (a spec, e.g. (moe:experts=4)) or none",
                        "rms", "normalisation layers of the encoder")};
}

ComponentInfo forecaster_info() {
  return {"forecaster",
          "time-series forecaster: instance-normalised windows, the block stack over time steps, a Linear from the "
          "last position to every forecast",
          stack_options(64, 2, "swiglu", "channel mixer of every block: swiglu, mlp, moe (a spec) or none", "rms",
                        "normalisation layers") +
              std::vector<OptionInfo>{
                  OptionInfo::choice("pos", "none", {"none", "learned"}, "absolute position embedding"),
                  OptionInfo::flag("instance_norm", true,
                                   "normalise each window per channel and undo it on the forecast (RevIN)")}};
}

ComponentInfo dlinear_info() {
  return {"dlinear",
          "DLinear: moving-average trend + seasonal remainder, one Linear over time each, shared by the channels "
          "(takes no mixer)",
          {OptionInfo::integer("kernel", 25, "moving-average window (odd)", 1)}};
}

ComponentInfo vit_info() {
  return {"vit",
          "ViT-style image classifier: patch tokens with learned positions, the block stack with bidirectional "
          "mixers, mean over the patches, a Linear head to the classes",
          stack_options(64, 4, "mlp", "channel mixer of every block: mlp (ViT's), swiglu, moe (a spec) or none", "layer",
                        "normalisation layers (ViT's: layer)") +
              std::vector<OptionInfo>{
                  OptionInfo::real("dropout", 0.0, "dropout on the patch embeddings while training", 0.0, 0.999999)}};
}

// Models that forecast [B, horizon, C] from a window; every other model emits per input position.
bool is_forecasting_model(const std::string& name) { return name == "forecaster" || name == "dlinear"; }

}  // namespace

bool model_takes_mixers(const std::string& spec) { return Spec::parse(spec).name != "dlinear"; }

const std::vector<ComponentInfo>& model_infos() {
  static const std::vector<ComponentInfo> infos = {
      language_model_info(), autoencoder_info(),
      {"probe", "one sequence mixer on the raw inputs, read at the last position (no embedding, no MLP)", {}},
      forecaster_info(), dlinear_info(), vit_info()};
  return infos;
}

namespace {
SequenceModel make_model(const std::string& spec, const ModelContext& c) {
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
  if (name == "vit") {
    if (c.vocab_size > 0) throw Error("model vit classifies images: it needs an image task (e.g. fashion_mnist)");
    read_stack_options(o, lm);
    lm.embedding_dropout = o.real("dropout");
    return std::make_shared<VitImpl>(lm, c.output_features);
  }
  if (name == "forecaster") {
    if (c.output_features != c.input_features) throw Error("model forecaster: the task must forecast the channels it reads");
    ForecasterOptions f;
    f.stack = lm;
    read_stack_options(o, f.stack);
    f.stack.position = o.text("pos");
    f.horizon = c.output_len;
    f.instance_norm = o.flag("instance_norm");
    return std::make_shared<ForecasterImpl>(f);
  }
  read_stack_options(o, lm);
  return std::make_shared<AutoEncoderImpl>(lm, c.seq_len);
}
}  // namespace

SequenceModel build_model(const std::string& spec, const ModelContext& c) {
  return built_within_limits("model " + spec, [&] { return make_model(spec, c); });
}

}  // namespace seqmix

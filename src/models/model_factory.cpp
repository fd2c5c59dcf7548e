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

// The block stack's options as each stacked model declares them (its own defaults in its own struct).
template <class O>
std::vector<Field<O>> stack_fields(const char* channel_meaning, const char* norm_meaning) {
  return {Field<O>::integer("dim", &O::dim, "model width", 2),
          Field<O>::integer("layers", &O::layers, "number of blocks", 1, 4096),
          Field<O>::spec("channel", &O::channel, channel_meaning),
          Field<O>::choice("norm", &O::norm, std::vector<std::string>{"rms", "layer"}, norm_meaning),
          Field<O>::spec("residual", &O::residual, "residual scheme")};
}

// What the task's context decides in a stack's settings: input and output sizes, the longest sequence, the mixers.
void place(LanguageModelOptions& lm, const ModelContext& c) {
  lm.vocab_size = c.vocab_size;
  lm.input_features = c.input_features;
  lm.output_features = c.output_features;
  lm.max_len = c.seq_len;
  lm.mixers = c.mixers;
}

// The stack's settings from a model's options and the context.
template <class O>
LanguageModelOptions stack_of(const O& o, const ModelContext& c) {
  LanguageModelOptions lm;
  place(lm, c);
  lm.dim = o.dim;
  lm.layers = o.layers;
  lm.channel_mixer = o.channel;
  lm.norm = o.norm;
  lm.residual = o.residual;
  return lm;
}

struct AutoencoderOptions {
  int64_t dim = 128, layers = 2;
  ChannelMixerSpec channel = "swiglu";
  std::string norm = "rms";
  ResidualSpec residual = "prenorm";
};
struct ForecasterModelOptions {
  int64_t dim = 64, layers = 2;
  ChannelMixerSpec channel = "swiglu";
  std::string norm = "rms";
  ResidualSpec residual = "prenorm";
  std::string pos = "none";
  bool instance_norm = true;
};
struct VitOptions {
  int64_t dim = 64, layers = 4;
  ChannelMixerSpec channel = "mlp";
  std::string norm = "layer";
  ResidualSpec residual = "prenorm";
  double dropout = 0.0;
};
struct DLinearOptions {
  int64_t kernel = 25;
};

// What every model but the forecasting ones and dlinear needs: mixers, and a task that emits per position.
void check_per_position(const std::string& name, const ModelContext& c) {
  if (c.output_len > 0)
    throw Error("model " + name +
                " emits one output per input position; a forecasting task needs model forecaster or dlinear");
  if (c.mixers.empty()) throw Error("model " + name + ": no mixer given");
}
void check_forecasting(const std::string& name, const ModelContext& c) {
  if (c.output_len <= 0)
    throw Error("model " + name + " forecasts the rows after its input window; it needs a forecasting task (e.g. ett)");
}

SequenceModel make_language_model(const LanguageModelOptions& o, const ModelContext& c) {
  check_per_position("lm", c);
  LanguageModelOptions lm = o;
  place(lm, c);
  return std::make_shared<LanguageModelImpl>(lm);
}

SequenceModel make_autoencoder(const AutoencoderOptions& o, const ModelContext& c) {
  check_per_position("autoencoder", c);
  return std::make_shared<AutoEncoderImpl>(stack_of(o, c), c.seq_len);
}

SequenceModel make_probe(const NoOptions&, const ModelContext& c) {
  check_per_position("probe", c);
  if (c.input_features <= 0) throw Error("model probe: needs a task with real-valued inputs (e.g. argmax)");
  if (c.mixers.size() != 1) throw Error("model probe: takes exactly one mixer");
  if (c.output_features != c.input_features)
    throw Error("model probe: the task's output width must equal its input width");
  return std::make_shared<ProbeModelImpl>(build_mixer(c.mixers[0], MixerContext{c.input_features, c.seq_len, true}));
}

SequenceModel make_forecaster(const ForecasterModelOptions& o, const ModelContext& c) {
  check_forecasting("forecaster", c);
  if (c.mixers.empty()) throw Error("model forecaster: no mixer given");
  if (c.output_features != c.input_features) throw Error("model forecaster: the task must forecast the channels it reads");
  ForecasterOptions f;
  f.stack = stack_of(o, c);
  f.stack.position = o.pos;
  f.horizon = c.output_len;
  f.instance_norm = o.instance_norm;
  return std::make_shared<ForecasterImpl>(f);
}

SequenceModel make_dlinear(const DLinearOptions& o, const ModelContext& c) {
  check_forecasting("dlinear", c);
  if (!c.mixers.empty()) throw Error("model dlinear takes no sequence mixer");
  if (c.output_features != c.input_features) throw Error("model dlinear: the task must forecast the channels it reads");
  return std::make_shared<DLinearImpl>(c.seq_len, c.output_len, c.input_features, o.kernel);
}

SequenceModel make_vit(const VitOptions& o, const ModelContext& c) {
  check_per_position("vit", c);
  if (c.vocab_size > 0) throw Error("model vit classifies images: it needs an image task (e.g. fashion_mnist)");
  LanguageModelOptions stack = stack_of(o, c);
  stack.embedding_dropout = o.dropout;
  return std::make_shared<VitImpl>(stack, c.output_features);
}

template <class O>
using ModelDeclarationOf = DeclarationOf<O, SequenceModel, const ModelContext&>;

}  // namespace

const std::vector<ModelDeclaration>& model_declarations() {
  using F = ForecasterModelOptions;
  static const std::vector<ModelDeclaration> declarations = {
      ModelDeclarationOf<LanguageModelOptions>{
          .name = "lm",
          .meaning = "GPT-style stack: embedding, N x [norm, mixer, norm, channel mixer], final norm, head",
          .fields = language_model_fields(),
          .make = make_language_model}
          .erase(),
      ModelDeclarationOf<AutoencoderOptions>{
          .name = "autoencoder",
          .meaning = "MAD's compression backbone: the block stack encodes, its last position is decoded per position "
                     "by an MLP",
          .fields = stack_fields<AutoencoderOptions>(
              "channel mixer of every block: swiglu, mlp, moe (a spec, e.g. (moe:experts=4)) or none",
              "normalisation layers of the encoder"),
          .make = make_autoencoder}
          .erase(),
      ModelDeclarationOf<NoOptions>{
          .name = "probe",
          .meaning = "one sequence mixer on the raw inputs, read at the last position (no embedding, no MLP)",
          .make = make_probe}
          .erase(),
      ModelDeclarationOf<F>{
          .name = "forecaster",
          .meaning = "time-series forecaster: instance-normalised windows, the block stack over time steps, a Linear "
                     "from the last position to every forecast",
          .fields = [] {
            auto fields = stack_fields<F>("channel mixer of every block: swiglu, mlp, moe (a spec) or none",
                                          "normalisation layers");
            fields.push_back(Field<F>::choice("pos", &F::pos, std::vector<std::string>{"none", "learned"},
                                              "absolute position embedding"));
            fields.push_back(Field<F>::flag("instance_norm", &F::instance_norm,
                                            "normalise each window per channel and undo it on the forecast (RevIN)"));
            return fields;
          }(),
          .make = make_forecaster}
          .erase(),
      ModelDeclarationOf<DLinearOptions>{
          .name = "dlinear",
          .meaning = "DLinear: moving-average trend + seasonal remainder, one Linear over time each, shared by the "
                     "channels (takes no mixer)",
          .fields = {Field<DLinearOptions>::integer("kernel", &DLinearOptions::kernel, "moving-average window (odd)", 1)},
          .make = make_dlinear}
          .erase(),
      ModelDeclarationOf<VitOptions>{
          .name = "vit",
          .meaning = "ViT-style image classifier: patch tokens with learned positions, the block stack with "
                     "bidirectional mixers, mean over the patches, a Linear head to the classes",
          .fields = [] {
            auto fields = stack_fields<VitOptions>(
                "channel mixer of every block: mlp (ViT's), swiglu, moe (a spec) or none",
                "normalisation layers (ViT's: layer)");
            fields.push_back(Field<VitOptions>::real("dropout", &VitOptions::dropout,
                                                     "dropout on the patch embeddings while training", 0.0, 0.999999));
            return fields;
          }(),
          .make = make_vit}
          .erase(),
  };
  return declarations;
}

const std::vector<ComponentInfo>& model_infos() {
  static const std::vector<ComponentInfo> infos = component_infos(model_declarations());
  return infos;
}

ModelSpec::ModelSpec(const std::string& text) : ParsedSpec(parse_spec(model_declarations(), "model", text)) {}

bool model_takes_mixers(const ModelSpec& spec) { return spec.name() != "dlinear"; }

SequenceModel build_model(const ModelSpec& spec, const ModelContext& c) {
  return built_within_limits("model " + spec.source, [&] { return spec.build(c); });
}

}  // namespace seqmix

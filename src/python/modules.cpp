// seqmix's modules for python/seqmix/modules.py: every mixer, channel mixer and model, and a trained run, as
// TorchScript custom classes (torch.classes.seqmix.*) holding the same C++ modules the CLI trains. Python sees
// each module's parameters and buffers as the very tensors the C++ layers read (same TensorImpl), which the
// Python nn.Module wrapper registers as its own: optimizers, state_dict, load_state_dict, .to() and autograd
// act on the C++ module directly. No layer math is written twice.
#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "seqmix/io/error.h"
#include "seqmix/models/language_model.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/task.h"
#include "seqmix/tasks/text_lm.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/run.h"
#include "seqmix/train/trainer.h"

namespace seqmix::python {
namespace {

using NamedTensors = std::tuple<std::vector<std::string>, std::vector<at::Tensor>>;

NamedTensors named(const torch::OrderedDict<std::string, at::Tensor>& items) {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  for (const auto& item : items) {
    names.push_back(item.key());
    tensors.push_back(item.value());
  }
  return {names, tensors};
}

// An auxiliary loss for Python: None when the module adds none.
c10::optional<at::Tensor> defined_or_none(const at::Tensor& t) {
  return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt;
}

// What every bound module has: the C++ module, its tensors, train/eval and its printout.
struct BoundModule : torch::CustomClassHolder {
  std::shared_ptr<torch::nn::Module> module;
};

template <class T>
void add_module_methods(torch::class_<T>& c) {
  c.def("named_parameters", [](const c10::intrusive_ptr<T>& self) { return named(self->module->named_parameters()); })
      .def("named_buffers", [](const c10::intrusive_ptr<T>& self) { return named(self->module->named_buffers()); })
      .def("train", [](const c10::intrusive_ptr<T>& self, bool on) { self->module->train(on); })
      .def("is_training", [](const c10::intrusive_ptr<T>& self) { return self->module->is_training(); })
      .def("describe", [](const c10::intrusive_ptr<T>& self) {
        std::ostringstream os;
        self->module->pretty_print(os);
        return os.str();
      });
}

// ---- sequence mixers ----------------------------------------------------------------------------------------

struct BoundMixerState : torch::CustomClassHolder {
  DecodeState state;
  int64_t position() const { return state.position; }
};

struct BoundMixer : BoundModule {
  Mixer mixer;
  std::string spec;
  BoundMixer(const std::string& spec_text, int64_t dim, int64_t max_len) {
    if (dim < 1) throw Error("seqmix.Mixer: dim must be >= 1 (got " + std::to_string(dim) + ")");
    if (max_len < 0) throw Error("seqmix.Mixer: max_len must be >= 0 (got " + std::to_string(max_len) + ")");
    const MixerSpec parsed = parse_mixer_spec(spec_text);
    MixerContext context;
    context.dim = dim;
    context.max_len = max_len;
    mixer = build_mixer(parsed, context);
    module = mixer;
    spec = parsed.resolved;
  }
};

// ---- channel mixers -------------------------------------------------------------------------------------------

struct BoundChannelMixer : BoundModule {
  ChannelMixer channel;
  BoundChannelMixer(const std::string& spec, int64_t dim) {
    if (dim < 1) throw Error("seqmix.ChannelMixer: dim must be >= 1 (got " + std::to_string(dim) + ")");
    channel = build_channel_mixer(spec, dim);
    if (!channel) throw Error("seqmix.ChannelMixer: '" + spec + "' is no channel mixer (use torch.nn.Identity)");
    module = channel;
  }
};

// ---- models -----------------------------------------------------------------------------------------------------

struct BoundModelState : torch::CustomClassHolder {
  LanguageModelState state;
  int64_t position() const { return state.position; }
};

struct BoundModel : BoundModule {
  SequenceModel model;
  std::string spec;
  explicit BoundModel(SequenceModel m, std::string model_spec) : model(std::move(m)), spec(std::move(model_spec)) {
    module = model;
  }
  // The language model for decoding; errors name the model this is otherwise.
  LanguageModelImpl& language_model(const char* what) const {
    auto* lm = dynamic_cast<LanguageModelImpl*>(model.get());
    if (!lm) throw Error(std::string(what) + " needs an lm model; this is " + spec);
    return *lm;
  }
};

c10::intrusive_ptr<BoundModel> build_bound_model(std::string spec, std::vector<std::string> mixers,
                                                 int64_t vocab_size, int64_t input_features, int64_t output_features,
                                                 int64_t seq_len, int64_t output_len) {
  ModelContext context;
  context.vocab_size = vocab_size;
  context.input_features = input_features;
  context.output_features = output_features;
  context.seq_len = seq_len;
  context.output_len = output_len;
  for (const auto& m : mixers) context.mixers.push_back(parse_mixer_spec(m));
  return c10::make_intrusive<BoundModel>(build_model(spec, context), spec);
}

// ---- runs ---------------------------------------------------------------------------------------------------------

struct BoundRun : torch::CustomClassHolder {
  Run run;
  int64_t step = 0;
  std::string directory;
  c10::intrusive_ptr<BoundModel> model;
  BoundRun(const std::string& dir, int64_t wanted_step) : directory(dir) {
    run = load_run(dir, at::get_num_threads(), wanted_step, step);  // the caller's thread count, as it is
    model = c10::make_intrusive<BoundModel>(run.model, run.model_spec);
  }
  const TextTask& text(const char* what) const {
    const auto* t = dynamic_cast<const TextTask*>(run.task.get());
    if (!t) throw Error(std::string(what) + " needs a run of the text task; " + directory + " trained on " + run.task->name());
    return *t;
  }
};

std::string registry_json() {
  const auto components = [](const std::vector<ComponentInfo>& infos) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& info : infos) {
      nlohmann::json options = nlohmann::json::array();
      for (const auto& o : info.options)
        options.push_back({{"key", o.key}, {"type", o.type_name()}, {"default", o.default_value}, {"meaning", o.meaning}});
      list.push_back({{"name", info.name}, {"meaning", info.meaning}, {"options", options}});
    }
    return list;
  };
  return nlohmann::json{{"mixers", components(mixer_infos())},
                        {"channel_mixers", components(channel_mixer_infos())},
                        {"residuals", components(residual_infos())},
                        {"models", components(model_infos())}}
      .dump();
}

}  // namespace
}  // namespace seqmix::python

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix;
  using namespace seqmix::python;

  m.class_<BoundMixerState>("MixerState").def("position", &BoundMixerState::position);
  m.class_<BoundModelState>("ModelState").def("position", &BoundModelState::position);

  auto mixer = m.class_<BoundMixer>("Mixer");
  mixer.def(torch::init<std::string, int64_t, int64_t>())
      .def("spec", [](const c10::intrusive_ptr<BoundMixer>& self) { return self->spec; })
      .def("kind", [](const c10::intrusive_ptr<BoundMixer>& self) { return self->mixer->kind(); })
      .def("dim", [](const c10::intrusive_ptr<BoundMixer>& self) { return self->mixer->dim(); })
      .def("is_causal", [](const c10::intrusive_ptr<BoundMixer>& self) { return self->mixer->is_causal(); })
      .def("forward", [](const c10::intrusive_ptr<BoundMixer>& self, const at::Tensor& x) {
        return self->mixer->forward(x);
      })
      .def("forward_masked", [](const c10::intrusive_ptr<BoundMixer>& self, const at::Tensor& x,
                                const at::Tensor& padding_mask) { return self->mixer->forward_masked(x, padding_mask); })
      .def("forward_packed", [](const c10::intrusive_ptr<BoundMixer>& self, const at::Tensor& x,
                                const at::Tensor& cu_seqlens) { return self->mixer->forward_packed(x, cu_seqlens); })
      .def("packs_natively", [](const c10::intrusive_ptr<BoundMixer>& self) { return self->mixer->packs_natively(); })
      .def("init_state", [](const c10::intrusive_ptr<BoundMixer>& self, int64_t batch) {
        auto s = c10::make_intrusive<BoundMixerState>();
        s->state = self->mixer->init_state(batch);
        return s;
      })
      .def("step", [](const c10::intrusive_ptr<BoundMixer>& self, const at::Tensor& x_t,
                      const c10::intrusive_ptr<BoundMixerState>& state) { return self->mixer->step(x_t, state->state); })
      .def("prefill", [](const c10::intrusive_ptr<BoundMixer>& self, const at::Tensor& x,
                         const c10::intrusive_ptr<BoundMixerState>& state) {
        return self->mixer->prefill(x, state->state);
      });
  add_module_methods(mixer);

  auto channel = m.class_<BoundChannelMixer>("ChannelMixer");
  channel.def(torch::init<std::string, int64_t>())
      .def("forward", [](const c10::intrusive_ptr<BoundChannelMixer>& self, const at::Tensor& x) {
        return self->channel->forward(x);
      })
      .def("auxiliary_loss", [](const c10::intrusive_ptr<BoundChannelMixer>& self) {
        return defined_or_none(self->channel->auxiliary_loss());
      });
  add_module_methods(channel);

  auto model = m.class_<BoundModel>("Model");
  model.def(torch::init(&build_bound_model))
      .def("spec", [](const c10::intrusive_ptr<BoundModel>& self) { return self->spec; })
      .def("forward", [](const c10::intrusive_ptr<BoundModel>& self, const at::Tensor& inputs) {
        return self->model->forward(inputs);
      })
      .def("forward_packed", [](const c10::intrusive_ptr<BoundModel>& self, const at::Tensor& inputs,
                                const at::Tensor& sequence_starts) {
        return self->model->forward_packed(inputs, sequence_starts);
      })
      .def("auxiliary_loss", [](const c10::intrusive_ptr<BoundModel>& self) {
        return defined_or_none(self->model->auxiliary_loss());
      })
      .def("init_state", [](const c10::intrusive_ptr<BoundModel>& self, int64_t batch) {
        auto s = c10::make_intrusive<BoundModelState>();
        s->state = self->language_model("init_state").init_state(batch);
        return s;
      })
      .def("step", [](const c10::intrusive_ptr<BoundModel>& self, const at::Tensor& inputs_t,
                      const c10::intrusive_ptr<BoundModelState>& state) {
        return self->language_model("step").step(inputs_t, state->state);
      })
      .def("prefill", [](const c10::intrusive_ptr<BoundModel>& self, const at::Tensor& inputs,
                         const c10::intrusive_ptr<BoundModelState>& state) {
        return self->language_model("prefill").prefill(inputs, state->state);
      })
      .def("generate", [](const c10::intrusive_ptr<BoundModel>& self, const at::Tensor& prompt, int64_t new_tokens,
                          double temperature, int64_t top_k, int64_t seed) {
        if (new_tokens < 0) throw Error("generate: tokens must be >= 0");
        if (temperature < 0) throw Error("generate: temperature must be >= 0 (0 = greedy)");
        if (top_k < 0) throw Error("generate: top_k must be >= 0 (0 = the whole vocabulary)");
        Sampling sampling;
        sampling.temperature = temperature;
        sampling.top_k = top_k;
        sampling.seed = static_cast<uint64_t>(seed);
        return self->language_model("generate").generate(prompt, new_tokens, sampling);
      })
      .def("save_weights", [](const c10::intrusive_ptr<BoundModel>& self, const std::string& path) {
        save_model_weights(path, *self->model);
      })
      .def("load_weights", [](const c10::intrusive_ptr<BoundModel>& self, const std::string& path) {
        load_model_weights(path, *self->model);
      });
  add_module_methods(model);

  m.class_<BoundRun>("Run")
      .def(torch::init<std::string, int64_t>())
      .def("model", [](const c10::intrusive_ptr<BoundRun>& self) { return self->model; })
      .def("step", [](const c10::intrusive_ptr<BoundRun>& self) { return self->step; })
      .def("model_spec", [](const c10::intrusive_ptr<BoundRun>& self) { return self->run.model_spec; })
      .def("task", [](const c10::intrusive_ptr<BoundRun>& self) { return self->run.task->resolved_spec(); })
      .def("test_set", [](const c10::intrusive_ptr<BoundRun>& self) {
        const Batch& test = self->run.task->test_set();
        return std::make_tuple(test.inputs, test.targets);
      })
      .def("eval_batch_size", [](const c10::intrusive_ptr<BoundRun>& self) { return self->run.task->eval_batch_size(); })
      .def("loss", [](const c10::intrusive_ptr<BoundRun>& self, const at::Tensor& outputs, const at::Tensor& inputs,
                      const at::Tensor& targets) { return self->run.task->loss(outputs, Batch{inputs, targets}); })
      .def("metrics", [](const c10::intrusive_ptr<BoundRun>& self) {
        c10::Dict<std::string, double> out;
        for (const auto& [k, v] : evaluate(*self->run.model, *self->run.task, nullptr, self->run.train.precision))
          out.insert(k, v);
        return out;
      })
      .def("encode", [](const c10::intrusive_ptr<BoundRun>& self, const std::string& text) {
        return self->text("encode").tokenizer().encode(text);
      })
      .def("decode", [](const c10::intrusive_ptr<BoundRun>& self, std::vector<int64_t> ids) {
        return self->text("decode").tokenizer().decode(ids);
      });

  m.def("registry() -> str", [] { return seqmix::python::registry_json(); });
}

// seqmix's modules for python/seqmix/modules.py: every mixer, channel mixer and model, and a trained run, as
// TorchScript custom classes (torch.classes.seqmix.*) holding the same C++ modules the CLI trains. The Python
// nn.Module owns the weights: each call binds the tensors it holds at that moment (its Parameters, FSDP2's
// unsharded ones, a parametrization's result, functional_call's dictionary) into the C++ module's parameter and
// buffer slots (BoundModule::bind: the slot's TensorImpl takes the given tensor's storage, set_data), so the C++
// layers read them; python/seqmix/_binding.py maps the gradients of the slots back to those tensors. No layer math
// is written twice.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include "seqmix/io/error.h"
#include "seqmix/models/language_model.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/modules/mixture_of_experts.h"
// Runs (load_run, weights files) need the training, tasks and checkpoints of seqmix_core; the pip package builds
// without them (SEQMIX_PYTHON_RUNS=0, CMakeLists.txt's SEQMIX_PACKAGE_ONLY) and python/seqmix says so when asked.
#if SEQMIX_PYTHON_RUNS
#include "seqmix/tasks/task.h"
#include "seqmix/tasks/text_lm.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/run.h"
#include "seqmix/train/trainer.h"
#endif

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

// A slot of a bound module: one parameter or buffer tensor of the C++ module, and the shape it was built with.
struct Slot {
  std::string name;
  at::Tensor own;  // the C++ module's tensor: the layers read it, a call binds the caller's tensor into it
  std::vector<int64_t> shape;
};

// Keys of tensors a slot cannot take: tensor subclasses (DTensor, fake tensors), functorch's wrappers, functional
// tensors. Their data is not a plain storage the C++ layers can read.
const c10::DispatchKeySet kForeignKeys({c10::DispatchKey::Python, c10::DispatchKey::FuncTorchGradWrapper,
                                        c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::Functionalize,
                                        c10::DispatchKey::PythonTLSSnapshot});

// What every bound module has: the C++ module, its tensor slots, train/eval and its printout, and what the module
// operators below need (a handle they find it by, its forward in each form, the shape that forward returns).
struct BoundModule : torch::CustomClassHolder {
  std::shared_ptr<torch::nn::Module> module;
  const int64_t handle;
  BoundModule();
  ~BoundModule() override;
  BoundModule(const BoundModule&) = delete;
  BoundModule& operator=(const BoundModule&) = delete;
  // The forward in one of its forms (ModuleForm); inputs and extra as the Python module's forward takes them.
  virtual at::Tensor call(const at::Tensor& inputs, const c10::optional<at::Tensor>& extra, int64_t form) = 0;
  // The shape call returns for inputs of this shape (symbolic under torch.compile).
  virtual std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const { return inputs.vec(); }
  // The loss term the last call added (MoE load balance); undefined when the module adds none.
  virtual at::Tensor auxiliary_loss() const { return {}; }
  // A one-sample input of this dtype that the forward takes (for output_dtype's probe).
  virtual at::Tensor probe_inputs(at::ScalarType dtype) const = 0;
  // The dtype the forward returns for inputs of `inputs` dtype under `autocast`, with parameters of `parameters`
  // dtype (asked once per combination).
  at::ScalarType output_dtype(at::ScalarType inputs, c10::optional<at::ScalarType> autocast,
                              at::ScalarType parameters);
  // Whether any part of the module adds an auxiliary loss (a mixture of experts), known before any forward.
  bool adds_auxiliary_loss() const {
    for (const auto& m : module->modules())
      if (dynamic_cast<const MixtureOfExpertsImpl*>(m.get())) return true;
    return false;
  }
  // Makes the C++ layers read these tensors: one per parameter, then one per buffer, in
  // named_parameters()/named_buffers() order (the order of parameter_slots()). Each is checked (a plain dense
  // tensor on the CPU or a CUDA GPU, of the slot's shape) and its error names the parameter; `what` names the call.
  void bind(at::TensorList parameters, at::TensorList buffers, const std::string& what);
  const std::vector<Slot>& parameter_slots() { return slots().first; }
  const std::vector<Slot>& buffer_slots() { return slots().second; }

 private:
  std::pair<std::vector<Slot>, std::vector<Slot>>& slots();
  std::optional<std::pair<std::vector<Slot>, std::vector<Slot>>> slots_;  // made on first use (after `module`)
  // output_dtype's answers by (inputs, autocast or Undefined, parameters' dtype).
  std::map<std::tuple<at::ScalarType, at::ScalarType, at::ScalarType>, at::ScalarType> output_dtypes_;
  std::mutex output_dtypes_mutex_;
};

// One slot per named tensor, in order. A tensor registered under two names (tied weights) would let a caller bind
// two different tensors into one slot: the modules tie by reading one tensor twice instead (the lm's tie=1), and
// one that registers a tensor twice is refused here.
std::vector<Slot> slots_of(const torch::OrderedDict<std::string, at::Tensor>& items) {
  std::vector<Slot> slots;
  for (const auto& item : items) {
    for (const Slot& s : slots)
      TORCH_CHECK(!s.own.is_same(item.value()), "seqmix: the module registers one tensor as both '", s.name,
                  "' and '", item.key(), "'; the Python binding needs one name per tensor");
    slots.push_back({item.key(), item.value(), item.value().sizes().vec()});
  }
  return slots;
}

std::pair<std::vector<Slot>, std::vector<Slot>>& BoundModule::slots() {
  if (!slots_) slots_.emplace(slots_of(module->named_parameters()), slots_of(module->named_buffers()));
  return *slots_;
}

std::string describe_tensor(const at::Tensor& t) {
  if (t.key_set().has(c10::DispatchKey::Python)) return "tensor subclass (a DTensor, a fake tensor, ...)";
  if (t.key_set().has(c10::DispatchKey::FuncTorchBatched)) return "torch.func.vmap batched tensor";
  if (t.key_set().has_any(kForeignKeys)) return "wrapped tensor (torch.func or functionalization)";
  return std::string(c10::toString(t.layout())) + " tensor";
}

// Whether a slot already reads exactly t's data (the same storage, offset, sizes, strides, dtype and device).
bool reads(const at::Tensor& own, const at::Tensor& t) {
  return own.is_same(t) || (own.storage().unsafeGetStorageImpl() == t.storage().unsafeGetStorageImpl() &&
                            own.storage_offset() == t.storage_offset() && own.sizes().equals(t.sizes()) &&
                            own.strides().equals(t.strides()) && own.dtype() == t.dtype());
}

// Autocast caches its casts of leaf tensors by TensorImpl, and a slot is one TensorImpl whatever it reads: a slot that
// reads other data inside an autocast region must not get the cast of what it read before.
void forget_autocast_casts() {
  if (at::autocast::is_autocast_enabled(c10::DeviceType::CPU) ||
      at::autocast::is_autocast_enabled(c10::DeviceType::CUDA))
    at::autocast::clear_cache();
}

// Binds the given tensors into the slots; the number of slots that changed what they read.
int64_t bind_slots(std::vector<Slot>& slots, at::TensorList given, const char* kind, const std::string& what) {
  TORCH_CHECK(given.size() == slots.size(), what, ": the module has ", slots.size(), " ", kind, "s, the call passed ",
              given.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    const at::Tensor& t = given[i];
    TORCH_CHECK(t.defined(), what, ": ", kind, " '", slot.name, "' is None");
    TORCH_CHECK(t.layout() == at::kStrided && !t.key_set().has_any(kForeignKeys), what, ": ", kind, " '", slot.name,
                "' is a ", describe_tensor(t), "; seqmix modules read plain dense tensors");
    TORCH_CHECK(t.is_cpu() || t.is_cuda(), what, ": ", kind, " '", slot.name, "' is on the ", t.device(),
                " device; seqmix modules compute on the CPU or a CUDA GPU (a module built on the meta device needs "
                ".to_empty(device=...) and reset_parameters() first)");
    TORCH_CHECK(t.sizes().equals(slot.shape), what, ": ", kind, " '", slot.name, "' has shape ", t.sizes(),
                "; the module was built with ", c10::IntArrayRef(slot.shape));
    TORCH_CHECK(at::isFloatingType(t.scalar_type()) == at::isFloatingType(slot.own.scalar_type()), what, ": ", kind,
                " '", slot.name, "' is ", t.scalar_type(), "; the module was built with ", slot.own.scalar_type());
  }
  int64_t changed = 0;
  for (size_t i = 0; i < slots.size(); ++i)
    if (!reads(slots[i].own, given[i])) {
      slots[i].own.set_data(given[i]);  // the slot now reads the tensor's storage, dtype and device
      ++changed;
    }
  return changed;
}

void BoundModule::bind(at::TensorList parameters, at::TensorList buffers, const std::string& what) {
  auto& [parameter_slots, buffer_slots] = slots();
  const int64_t changed =
      bind_slots(parameter_slots, parameters, "parameter", what) + bind_slots(buffer_slots, buffers, "buffer", what);
  if (changed > 0) forget_autocast_casts();
}

// The forms of a bound module's forward the module operators call (python/seqmix/modules.py passes them).
enum ModuleForm : int64_t { plain = 0, masked = 1, packed = 2 };

// The live bound modules by handle: a compiled graph names its module by handle (an int is what Dynamo can
// put in a graph; a TorchScript object is not).
struct BoundModules {
  std::mutex mutex;
  std::unordered_map<int64_t, BoundModule*> by_handle;
  static BoundModules& get() {
    static BoundModules modules;
    return modules;
  }
};

int64_t next_handle() {
  static std::atomic<int64_t> counter{0};
  return ++counter;
}

BoundModule::BoundModule() : handle(next_handle()) {
  auto& all = BoundModules::get();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.by_handle[handle] = this;
}

BoundModule::~BoundModule() {
  auto& all = BoundModules::get();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.by_handle.erase(handle);
}

// Autograd on while a scope runs, also below an operator's autograd kernel (where the dispatcher leaves the autograd
// keys out): the C++ layers may differentiate inside their forward (the energy mixer's descent), and
// module_backward differentiates the recomputed forward. Grad mode is left to the caller.
class AutogradKeysOn {
 public:
  AutogradKeysOn() : keys_(with_autograd_keys()) {}

 private:
  static c10::impl::LocalDispatchKeySet with_autograd_keys() {
    c10::impl::LocalDispatchKeySet keys = c10::impl::tls_local_dispatch_key_set();
    keys.excluded_ = keys.excluded_ - c10::autograd_dispatch_keyset_with_ADInplaceOrView;
    return keys;
  }
  c10::impl::ForceDispatchKeyGuard keys_;
};

BoundModule& bound_module(int64_t handle) {
  auto& all = BoundModules::get();
  std::lock_guard<std::mutex> lock(all.mutex);
  const auto found = all.by_handle.find(handle);
  TORCH_CHECK(found != all.by_handle.end(), "seqmix.module_forward: module ", handle,
              " no longer exists (a compiled function outlived the seqmix module it calls)");
  return *found->second;
}

template <class T>
void add_module_methods(torch::class_<T>& c) {
  c.def("named_parameters", [](const c10::intrusive_ptr<T>& self) { return named(self->module->named_parameters()); })
      .def("named_buffers", [](const c10::intrusive_ptr<T>& self) { return named(self->module->named_buffers()); })
      .def("train", [](const c10::intrusive_ptr<T>& self, bool on) { self->module->train(on); })
      .def("is_training", [](const c10::intrusive_ptr<T>& self) { return self->module->is_training(); })
      .def("handle", [](const c10::intrusive_ptr<T>& self) { return self->handle; })
      .def("adds_auxiliary_loss", [](const c10::intrusive_ptr<T>& self) { return self->adds_auxiliary_loss(); })
      // ([parameter names], [buffer names]): the slots bind takes, in its order.
      .def("slot_names",
           [](const c10::intrusive_ptr<T>& self) {
             std::vector<std::string> parameters, buffers;
             for (const Slot& s : self->parameter_slots()) parameters.push_back(s.name);
             for (const Slot& s : self->buffer_slots()) buffers.push_back(s.name);
             return std::make_tuple(parameters, buffers);
           })
      // The parameter slots' own tensors (what the C++ layers read; python/seqmix/_binding.py differentiates them).
      .def("parameter_slots",
           [](const c10::intrusive_ptr<T>& self) {
             std::vector<at::Tensor> own;
             for (const Slot& s : self->parameter_slots()) own.push_back(s.own);
             return own;
           })
      .def("bind", [](const c10::intrusive_ptr<T>& self, std::vector<at::Tensor> parameters,
                      std::vector<at::Tensor> buffers, std::string what) { self->bind(parameters, buffers, what); })
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
  int64_t max_len = 0;
  BoundMixer(const std::string& spec_text, int64_t dim, int64_t max_len) : max_len(max_len) {
    if (dim < 1) throw Error("seqmix.Mixer: dim must be >= 1 (got " + std::to_string(dim) + ")");
    if (max_len < 0) throw Error("seqmix.Mixer: max_len must be >= 0 (got " + std::to_string(max_len) + ")");
    const MixerSpec parsed = parse_mixer_spec(spec_text);
    MixerContext context;
    context.dim = dim;
    context.max_len = max_len;
    mixer = build_mixer(parsed, context);
    module = mixer;
    spec = parsed.text;
  }
  at::Tensor probe_inputs(at::ScalarType dtype) const override {
    return at::zeros({1, max_len == 1 ? 1 : 2, mixer->dim()}, at::dtype(dtype));  // [1,T,D]
  }
  at::Tensor call(const at::Tensor& x, const c10::optional<at::Tensor>& extra, int64_t form) override {
    if (form == ModuleForm::masked) return mixer->forward_masked(x, extra.value());
    if (form == ModuleForm::packed) return mixer->forward_packed(x, extra.value());
    return mixer->forward(x);
  }
};

// ---- channel mixers -------------------------------------------------------------------------------------------

struct BoundChannelMixer : BoundModule {
  ChannelMixer channel;
  BoundChannelMixer(const std::string& spec, int64_t dim) {
    if (dim < 1) throw Error("seqmix.ChannelMixer: dim must be >= 1 (got " + std::to_string(dim) + ")");
    this->dim = dim;
    channel = build_channel_mixer(spec, dim);
    if (!channel) throw Error("seqmix.ChannelMixer: '" + spec + "' is no channel mixer (use torch.nn.Identity)");
    module = channel;
  }
  int64_t dim = 0;
  at::Tensor probe_inputs(at::ScalarType dtype) const override { return at::zeros({1, 1, dim}, at::dtype(dtype)); }
  at::Tensor call(const at::Tensor& x, const c10::optional<at::Tensor>&, int64_t) override {
    return channel->forward(x);
  }
  at::Tensor auxiliary_loss() const override { return channel->auxiliary_loss(); }
};

// ---- models -----------------------------------------------------------------------------------------------------

struct BoundModelState : torch::CustomClassHolder {
  LanguageModelState state;
  int64_t position() const { return state.position; }
};

struct BoundModel : BoundModule {
  SequenceModel model;
  std::string spec;
  ModelContext context;  // what it was built for: a copy of the module is built from spec and context
  BoundModel(SequenceModel m, std::string model_spec, ModelContext built_for)
      : model(std::move(m)), spec(std::move(model_spec)), context(std::move(built_for)) {
    module = model;
  }
  // Tokens [1,L] or features [1,L,F], L the length the model was built for (some models take no other).
  at::Tensor probe_inputs(at::ScalarType dtype) const override {
    const int64_t length = context.seq_len > 0 ? context.seq_len : 2;
    if (context.vocab_size > 0) return at::zeros({1, length}, at::dtype(at::kLong));
    return at::zeros({1, length, context.input_features}, at::dtype(dtype));
  }
  at::Tensor call(const at::Tensor& inputs, const c10::optional<at::Tensor>& extra, int64_t form) override {
    return form == ModuleForm::packed ? model->forward_packed(inputs, extra.value()) : model->forward(inputs);
  }
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override {
    return model->output_shape(inputs);
  }
  at::Tensor auxiliary_loss() const override { return model->auxiliary_loss(); }
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
  return c10::make_intrusive<BoundModel>(build_model(spec, context), spec, context);
}

// ---- runs ---------------------------------------------------------------------------------------------------------
#if SEQMIX_PYTHON_RUNS
struct BoundRun : torch::CustomClassHolder {
  Run run;
  int64_t step = 0;
  std::string directory;
  c10::intrusive_ptr<BoundModel> model;
  BoundRun(const std::string& dir, int64_t wanted_step) : directory(dir) {
    run = load_run(dir, at::get_num_threads(), wanted_step, step);  // the caller's thread count, as it is
    model = c10::make_intrusive<BoundModel>(run.model, run.model_spec, model_context_for(*run.task, run.mixers));
  }
  const TextTask& text(const char* what) const {
    const auto* t = dynamic_cast<const TextTask*>(run.task.get());
    if (!t) throw Error(std::string(what) + " needs a run of the text task; " + directory + " trained on " + run.task->name());
    return *t;
  }
};
#endif

// ---- torch.compile: a bound module's forward as two operators ----------------------------------------------------
// Dynamo cannot trace a TorchScript object's methods, so under torch.compile python/seqmix/modules.py calls a bound
// module through module_forward (the C++ forward; its Meta kernel gives the shape output_shape says) and
// module_backward, which runs the forward again with autograd on and differentiates it, as activation
// checkpointing does, from the random state the forward began from (dropout draws the same masks) and under the
// same autocast. python/seqmix/_compile.py registers module_backward as module_forward's autograd.

// The CPU generator's state (a uint8 tensor).
at::Tensor cpu_random_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_cpu_random_state(const at::Tensor& state) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// Runs a scope from a saved random state and puts the state it found back afterwards, so a recompute in the
// backward pass neither changes nor depends on what was drawn since the forward.
class RandomStateScope {
 public:
  explicit RandomStateScope(const at::Tensor& state) : found_(cpu_random_state()) { set_cpu_random_state(state); }
  ~RandomStateScope() { set_cpu_random_state(found_); }
  RandomStateScope(const RandomStateScope&) = delete;
  RandomStateScope& operator=(const RandomStateScope&) = delete;

 private:
  at::Tensor found_;
};

// Autocast on `device` to `dtype` (or off) while the scope runs: a compiled graph passes the autocast its caller
// had, so the forward and its recompute cast as the eager forward would.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, c10::optional<at::ScalarType> dtype)
      : device_(device),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        was_dtype_(at::autocast::get_autocast_dtype(device)) {
    at::autocast::set_autocast_enabled(device, dtype.has_value());
    if (dtype) at::autocast::set_autocast_dtype(device, *dtype);
  }
  ~AutocastScope() {
    const bool opened = !was_enabled_ && at::autocast::is_autocast_enabled(device_);
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
    // As leaving torch.autocast does: the casts of weights cached in the scope (the backward's recompute runs
    // outside the user's autocast) must not outlive it, or the next step would read weights from before its update.
    if (opened) at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// Binds each slot to a copy of its current tensor on the CPU, floating ones in `dtype`, while the scope runs, then
// puts back what the slots held (output_dtype's probe runs on CPU inputs, in the dtype the caller's parameters have).
class ProbeBinding {
 public:
  ProbeBinding(BoundModule& bound, at::ScalarType dtype) {
    for (const auto* slots : {&bound.parameter_slots(), &bound.buffer_slots()})
      for (const Slot& slot : *slots) {
        held_.emplace_back(slot.own, slot.own.variable_data());
        const auto type = at::isFloatingType(slot.own.scalar_type()) ? dtype : slot.own.scalar_type();
        slot.own.set_data(slot.own.detach().to(at::kCPU, type));
      }
    forget_autocast_casts();
  }
  ~ProbeBinding() {
    for (auto& [own, previous] : held_) own.set_data(previous);
    forget_autocast_casts();
  }
  ProbeBinding(const ProbeBinding&) = delete;
  ProbeBinding& operator=(const ProbeBinding&) = delete;

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> held_;  // (slot, what it held)
};

at::ScalarType BoundModule::output_dtype(at::ScalarType inputs, c10::optional<at::ScalarType> autocast,
                                         at::ScalarType parameters) {
  const auto key = std::make_tuple(inputs, autocast.has_value() ? *autocast : at::ScalarType::Undefined, parameters);
  std::lock_guard<std::mutex> lock(output_dtypes_mutex_);
  if (const auto found = output_dtypes_.find(key); found != output_dtypes_.end()) return found->second;
  // The probe: one sample through the real forward, drawing nothing from the generator. (Called by Python before
  // tracing, python/seqmix/_compile.py: inside a fake kernel the fake-tensor mode would take the probe over.)
  AutogradKeysOn autograd;
  at::NoGradGuard no_grad;
  RandomStateScope same_draws(cpu_random_state());
  AutocastScope casts(c10::DeviceType::CPU, autocast);
  ProbeBinding probe(*this, parameters);
  const at::ScalarType dtype = call(probe_inputs(inputs), c10::nullopt, ModuleForm::plain).scalar_type();
  output_dtypes_[key] = dtype;
  return dtype;
}

const char* const kModuleForward = "seqmix.module_forward";

// The bound module of a module operator, bound to the tensors the graph passed.
BoundModule& module_bound_to(int64_t handle, at::TensorList parameters, at::TensorList buffers) {
  BoundModule& bound = bound_module(handle);
  bound.bind(parameters, buffers, kModuleForward);
  return bound;
}

bool differentiable(const at::Tensor& t) { return at::isFloatingType(t.scalar_type()); }

// The auxiliary loss as module_forward returns it: float32 [], zero when the module adds none.
at::Tensor auxiliary_or_zero(const BoundModule& bound, const at::Tensor& like) {
  const at::Tensor aux = bound.auxiliary_loss();
  return aux.defined() ? aux.to(at::kFloat) : at::zeros({}, like.options().dtype(at::kFloat));
}

// (outputs in dtype, auxiliary loss float32 [], the random state the forward began from uint8).
std::tuple<at::Tensor, at::Tensor, at::Tensor> module_forward(int64_t handle, const at::Tensor& inputs,
                                                              const c10::optional<at::Tensor>& extra, int64_t form,
                                                              at::TensorList parameters, at::TensorList buffers,
                                                              at::ScalarType dtype,
                                                              c10::optional<at::ScalarType> autocast) {
  BoundModule& bound = module_bound_to(handle, parameters, buffers);
  at::Tensor random_state = cpu_random_state();
  AutogradKeysOn autograd;
  at::NoGradGuard no_grad;  // the autograd registration builds the graph; the recompute differentiates
  AutocastScope casts(inputs.device().type(), autocast);
  at::Tensor outputs = bound.call(inputs, extra, form).to(dtype);  // dtype: what output_dtype said, so a no-op
  return {outputs, auxiliary_or_zero(bound, inputs).detach(), random_state};
}

// (gradient of the inputs, [0] for token inputs; gradients of the parameters, in the slots' order). Every floating
// parameter gets one: which of them the graph trains is the graph's business (AOTAutograd drops the others).
std::tuple<at::Tensor, std::vector<at::Tensor>> module_backward(
    int64_t handle, const at::Tensor& inputs, const c10::optional<at::Tensor>& extra, int64_t form,
    at::TensorList parameters, at::TensorList buffers, at::ScalarType dtype, c10::optional<at::ScalarType> autocast,
    const at::Tensor& random_state, const at::Tensor& grad_outputs, const at::Tensor& grad_auxiliary_loss) {
  BoundModule& bound = module_bound_to(handle, parameters, buffers);
  // Below an operator's autograd kernel, and in a backward pass, autograd is off: on again for the recompute.
  AutogradKeysOn autograd;
  at::AutoGradMode grad_mode(true);
  RandomStateScope same_draws(random_state);
  AutocastScope casts(inputs.device().type(), autocast);

  std::vector<at::Tensor> own;
  for (const Slot& slot : bound.parameter_slots()) {
    own.push_back(slot.own);
    slot.own.requires_grad_(differentiable(slot.own));
  }
  at::Tensor x = inputs.detach();
  if (differentiable(x)) x.requires_grad_(true);
  const at::Tensor outputs = bound.call(x, extra, form).to(dtype);
  const at::Tensor aux = bound.auxiliary_loss();
  std::vector<at::Tensor> roots, seeds;
  if (outputs.requires_grad()) {
    roots.push_back(outputs);
    seeds.push_back(grad_outputs);
  }
  if (aux.defined() && aux.requires_grad()) {
    roots.push_back(aux.to(at::kFloat));
    seeds.push_back(grad_auxiliary_loss);
  }
  std::vector<at::Tensor> wrt;
  if (x.requires_grad()) wrt.push_back(x);
  for (const auto& p : own)
    if (p.requires_grad()) wrt.push_back(p);
  std::vector<at::Tensor> grads;
  if (!roots.empty() && !wrt.empty())
    grads = torch::autograd::grad(roots, wrt, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                                  /*allow_unused=*/true);
  size_t next = 0;
  const auto take = [&](const at::Tensor& like) {
    at::Tensor g = next < grads.size() ? grads[next] : at::Tensor();
    ++next;
    return g.defined() ? g : at::zeros_like(like);
  };
  at::Tensor grad_inputs = x.requires_grad() ? take(x) : at::empty({0}, inputs.options().dtype(at::kFloat));
  std::vector<at::Tensor> grad_parameters;
  for (const auto& p : own) grad_parameters.push_back(p.requires_grad() ? take(p) : at::zeros_like(p));
  return {grad_inputs, grad_parameters};
}

// The Meta kernels check the slot counts only: a fake tensor cannot be bound (shapes are checked when the real
// kernel binds).
void check_slot_counts(int64_t handle, at::TensorList parameters, at::TensorList buffers) {
  BoundModule& bound = bound_module(handle);
  TORCH_CHECK(parameters.size() == bound.parameter_slots().size() && buffers.size() == bound.buffer_slots().size(),
              kModuleForward, ": module ", handle, " has ", bound.parameter_slots().size(), " parameters and ",
              bound.buffer_slots().size(), " buffers, the call passed ", parameters.size(), " and ", buffers.size());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> module_forward_meta(int64_t handle, const at::Tensor& inputs,
                                                                   const c10::optional<at::Tensor>&, int64_t,
                                                                   at::TensorList parameters, at::TensorList buffers,
                                                                   at::ScalarType dtype,
                                                                   c10::optional<at::ScalarType>) {
  check_slot_counts(handle, parameters, buffers);
  BoundModule& bound = bound_module(handle);
  static const auto state_size = cpu_random_state().sizes().vec();
  return {at::empty_symint(bound.output_shape(inputs.sym_sizes()), inputs.options().dtype(dtype)),
          at::empty({}, inputs.options().dtype(at::kFloat)), at::empty(state_size, inputs.options().dtype(at::kByte))};
}

std::tuple<at::Tensor, std::vector<at::Tensor>> module_backward_meta(
    int64_t handle, const at::Tensor& inputs, const c10::optional<at::Tensor>&, int64_t, at::TensorList parameters,
    at::TensorList buffers, at::ScalarType, c10::optional<at::ScalarType>, const at::Tensor&, const at::Tensor&,
    const at::Tensor&) {
  check_slot_counts(handle, parameters, buffers);
  std::vector<at::Tensor> grad_parameters;
  for (const auto& p : parameters) grad_parameters.push_back(at::empty_like(p));
  return {differentiable(inputs) ? at::empty_like(inputs) : at::empty({0}, inputs.options().dtype(at::kFloat)),
          grad_parameters};
}

std::string registry_json() {
  const auto components = [](const std::vector<ComponentInfo>& infos) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& info : infos) {
      nlohmann::json options = nlohmann::json::array();
      for (const auto& o : info.options) {
        nlohmann::json option = {{"key", o.key}, {"type", o.type_name()}, {"default", o.default_value}, {"meaning", o.meaning}};
        if (!o.choices.empty()) option["choices"] = o.choices;  // a choice's allowed values
        options.push_back(option);
      }
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
      .def("max_len", [](const c10::intrusive_ptr<BoundMixer>& self) { return self->max_len; })
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
      // (spec, mixers, vocab_size, input_features, output_features, seq_len, output_len): Model's arguments
      .def("construction", [](const c10::intrusive_ptr<BoundModel>& self) {
        const ModelContext& c = self->context;
        return std::make_tuple(self->spec, resolved_texts(c.mixers), c.vocab_size, c.input_features,
                               c.output_features, c.seq_len, c.output_len);
      })
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
      });
  add_module_methods(model);

#if SEQMIX_PYTHON_RUNS
  model.def("save_weights", [](const c10::intrusive_ptr<BoundModel>& self, const std::string& path) {
         save_model_weights(path, *self->model);
       })
      .def("load_weights", [](const c10::intrusive_ptr<BoundModel>& self, const std::string& path) {
        load_model_weights(path, *self->model);
      });

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
#endif
  // {"version", "runs"}: what this build of the library holds (python/seqmix reads it).
  m.def("build_info() -> str", [] {
    return nlohmann::json{{"version", SEQMIX_VERSION}, {"runs", SEQMIX_PYTHON_RUNS == 1}}.dump();
  });
  m.def("registry() -> str", [] { return seqmix::python::registry_json(); });
  m.def("module_forward(int module, Tensor inputs, Tensor? extra, int form, Tensor[] parameters, Tensor[] buffers, "
        "ScalarType dtype, ScalarType? autocast) -> (Tensor outputs, Tensor auxiliary_loss, Tensor random_state)");
  m.def("module_backward(int module, Tensor inputs, Tensor? extra, int form, Tensor[] parameters, Tensor[] buffers, "
        "ScalarType dtype, ScalarType? autocast, Tensor random_state, Tensor grad_outputs, Tensor grad_auxiliary_loss) "
        "-> (Tensor grad_inputs, Tensor[] grad_parameters)");
  m.def("module_output_dtype(int module, ScalarType inputs, ScalarType? autocast, ScalarType parameters) -> ScalarType",
        [](int64_t handle, at::ScalarType inputs, c10::optional<at::ScalarType> autocast, at::ScalarType parameters) {
          return seqmix::python::bound_module(handle).output_dtype(inputs, autocast, parameters);
        });
}

TORCH_LIBRARY_IMPL(seqmix, CompositeExplicitAutograd, m) {
  m.impl("module_forward", &seqmix::python::module_forward);
  m.impl("module_backward", &seqmix::python::module_backward);
}

TORCH_LIBRARY_IMPL(seqmix, Meta, m) {
  m.impl("module_forward", &seqmix::python::module_forward_meta);
  m.impl("module_backward", &seqmix::python::module_backward_meta);
}

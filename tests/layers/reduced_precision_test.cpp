// Reduced precision over the whole registry: every registered mixer (and FEM on every prior), every channel mixer
// and every model runs forward, backward and, where it decodes, init_state/prefill/step
//   (a) as a bfloat16 and (b) as a float16 module (module.to(dtype), inputs in that dtype), and
//   (c) as a float32 module under bfloat16 autocast (as `seqmix train --dtype bf16` runs it),
// with outputs, the input gradient and the parameter gradients within a stated multiple of the dtype's epsilon of
// the float32 module on the same inputs (the norm of the difference over the norm of the float32 result). The
// layers reach their ops through the dispatcher, which computes reduced precision in float32 (ops that have no
// reduced-precision kernel, like the delta rule's triangular solve, included); a layer that called a kernel
// directly fails here with the kernel's dtype error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "seqmix/models/language_model.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/layers/fem.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/precision.h"
#include "seqmix/train/run.h"

namespace seqmix {
namespace {

// The tolerances, as multiples of the dtype's machine epsilon (bf16 2^-7, fp16 2^-10): outputs and decode steps,
// and gradients (one more rounded pass, and the parameters' gradients summed over every position).
constexpr double kOutputTolerance = 8;
constexpr double kGradientTolerance = 16;

enum class Mode { bf16_module, fp16_module, bf16_autocast };
const char* name_of(Mode m) {
  return m == Mode::bf16_module ? "bf16 module" : m == Mode::fp16_module ? "fp16 module" : "fp32 module, bf16 autocast";
}
torch::ScalarType dtype_of(Mode m) { return m == Mode::fp16_module ? torch::kHalf : torch::kBFloat16; }
double epsilon_of(Mode m) { return m == Mode::fp16_module ? 0x1p-10 : 0x1p-7; }
bool is_module_mode(Mode m) { return m != Mode::bf16_autocast; }
const Mode kModes[] = {Mode::bf16_module, Mode::fp16_module, Mode::bf16_autocast};

// ||actual - expected|| / ||expected||, in float64.
double relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  const auto a = actual.to(torch::kDouble), e = expected.to(torch::kDouble);
  return ((a - e).norm() / e.norm().clamp_min(1e-30)).item<double>();
}

// All parameter gradients of a module, flattened and joined (float64; a missing gradient as zeros).
torch::Tensor parameter_gradients(torch::nn::Module& m) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : m.parameters())
    grads.push_back(p.grad().defined() ? p.grad().to(torch::kDouble).flatten()
                                       : torch::zeros({p.numel()}, torch::kDouble));
  return grads.empty() ? torch::zeros({1}, torch::kDouble) : torch::cat(grads);
}

// The worst relative errors of one component in one mode, for the report the sweep prints.
struct Errors {
  double output = 0, input_gradient = 0, parameter_gradients = 0, decode = 0;
};

// What a mode does to a module and to a floating-point input: the module and input in the dtype, or, under
// autocast, in float32 holding values the dtype represents. The float32 reference holds those same values, so what
// is measured is the rounding of the computation, not of the weights and inputs (which moves a ReLU feature's
// near-zero query across zero, and a normalised linear read's gradient, 1/normaliser, with it).
struct InMode {
  Mode mode;
  void to_mode(torch::nn::Module& m) const {
    m.to(dtype_of(mode));
    if (!is_module_mode(mode)) m.to(torch::kFloat);
  }
  void to_reference(torch::nn::Module& m) const { m.to(dtype_of(mode)), m.to(torch::kFloat); }
  torch::Tensor input(const torch::Tensor& x) const {
    if (!x.is_floating_point()) return x;
    const auto low = x.to(dtype_of(mode));
    return is_module_mode(mode) ? low : low.to(torch::kFloat);
  }
  Precision autocast() const { return is_module_mode(mode) ? Precision::fp32 : Precision::bf16; }
};

// Checks that y (the reduced-precision run) is finite, has the mode's dtype for module modes, and is within
// `tolerance` epsilons of the reference; returns the relative error.
double expect_close(const std::string& what, Mode mode, const torch::Tensor& y, const torch::Tensor& reference,
                    double tolerance) {
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>()) << what << " is not finite";
  if (is_module_mode(mode) && reference.is_floating_point()) EXPECT_EQ(y.scalar_type(), dtype_of(mode)) << what;
  const double error = relative_error(y, reference);
  EXPECT_LE(error, tolerance * epsilon_of(mode))
      << what << ": relative error " << error << " = " << error / epsilon_of(mode) << " eps (" << name_of(mode) << ")";
  return error;
}

// Forward and backward of `reference` (float32) and `low` (the same weights, in the mode) on x; the upstream gradient
// is fixed. x_requires_grad: the input is a float leaf.
template <class Forward>
Errors compare_forward_backward(const std::string& what, Mode mode, torch::nn::Module& reference,
                                torch::nn::Module& low, const torch::Tensor& x, const Forward& forward) {
  const InMode in{mode};
  const bool float_input = x.is_floating_point();
  // The reference reads the values the reduced-precision run reads.
  auto x_ref = float_input ? in.input(x).to(torch::kFloat).detach().requires_grad_() : x;
  auto x_low = float_input ? in.input(x).detach().requires_grad_() : x;
  const auto y_ref = forward(reference, x_ref);
  const torch::Tensor y_low = [&] {
    const AutocastGuard autocast(in.autocast());
    return forward(low, x_low);
  }();
  Errors e;
  e.output = expect_close(what + " output", mode, y_low, y_ref, kOutputTolerance);
  const auto upstream = torch::randn(y_ref.sizes(), at::make_generator<at::CPUGeneratorImpl>(11));
  (y_ref * upstream).sum().backward();
  (y_low.to(torch::kFloat) * upstream).sum().backward();
  if (float_input) {
    e.input_gradient = relative_error(x_low.grad(), x_ref.grad());
    EXPECT_LE(e.input_gradient, kGradientTolerance * epsilon_of(mode)) << what << " input gradient: "
                                                                       << e.input_gradient / epsilon_of(mode) << " eps";
  }
  e.parameter_gradients = relative_error(parameter_gradients(low), parameter_gradients(reference));
  EXPECT_LE(e.parameter_gradients, kGradientTolerance * epsilon_of(mode))
      << what << " parameter gradients: " << e.parameter_gradients / epsilon_of(mode) << " eps";
  for (const auto& p : low.parameters())
    if (p.grad().defined() && is_module_mode(mode)) EXPECT_EQ(p.grad().scalar_type(), dtype_of(mode)) << what;
  return e;
}

// One line of what was measured, in epsilons (the test binary run alone prints the whole table).
void add_to_report(const std::string& what, Mode mode, const Errors& e) {
  const double eps = epsilon_of(mode);
  std::printf("%-28s %-26s output %5.2f  d_input %5.2f  d_params %5.2f  decode %5.2f eps\n", what.c_str(),
              name_of(mode), e.output / eps, e.input_gradient / eps, e.parameter_gradients / eps, e.decode / eps);
}

// ---- sequence mixers ------------------------------------------------------------------------------------------

constexpr int64_t kDim = 32, kBatch = 2, kLength = 12, kPrefill = 5;

// Every registered mixer with its defaults, and FEM on every prior.
std::vector<std::string> mixer_specs() {
  std::vector<std::string> specs;
  for (const auto& info : mixer_infos()) specs.push_back(info.name);
  // Not prior=delta: its signed weights' normaliser crosses zero and its read reaches 1e27 at initialisation in any
  // precision (docs/fem.md), so no tolerance relative to float32 means anything; the delta mixer is swept.
  for (const std::string& prior : fem_prior_names())
    if (prior != "softmax" && prior != "delta") specs.push_back("fem:prior=" + prior);  // softmax: FEM's default
  specs.push_back("fem:cap=0");  // the running-max path of the softmax prior
  return specs;
}

Mixer seeded_mixer(const std::string& spec) {
  torch::manual_seed(3);
  return build_mixer(spec, MixerContext{kDim, kLength});
}

Errors check_mixer(const std::string& spec, Mode mode) {
  const InMode in{mode};
  auto reference = seeded_mixer(spec);
  auto low = seeded_mixer(spec);
  in.to_mode(*low);
  in.to_reference(*reference);
  const auto x = torch::randn({kBatch, kLength, kDim}, at::make_generator<at::CPUGeneratorImpl>(5));
  Errors e = compare_forward_backward(spec, mode, *reference, *low, x,
                                      [](torch::nn::Module& m, const torch::Tensor& input) {
                                        return dynamic_cast<MixerImpl&>(m).forward(input);
                                      });
  if (!low->is_causal()) return e;
  // Decode in the mode: a prefill, then one step per token, against the float32 forward.
  torch::NoGradGuard no_grad;
  const auto x_low = in.input(x);
  const auto y_ref = reference->forward(x_low.to(torch::kFloat));
  const AutocastGuard autocast(in.autocast());
  auto state = low->init_state(kBatch);
  std::vector<torch::Tensor> ys{low->prefill(x_low.narrow(1, 0, kPrefill), state)};
  for (int64_t t = kPrefill; t < kLength; ++t) ys.push_back(low->step(x_low.select(1, t), state).unsqueeze(1));
  e.decode = expect_close(spec + " decode", mode, torch::cat(ys, 1), y_ref, kOutputTolerance);
  return e;
}

class ReducedPrecisionMixer : public ::testing::TestWithParam<std::string> {};

TEST_P(ReducedPrecisionMixer, ForwardBackwardAndDecodeStayCloseToFloat32) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(name_of(mode));
    add_to_report(GetParam(), mode, check_mixer(GetParam(), mode));
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, ReducedPrecisionMixer, ::testing::ValuesIn(mixer_specs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// ---- channel mixers -------------------------------------------------------------------------------------------

TEST(ReducedPrecision, EveryChannelMixerStaysCloseToFloat32) {
  for (const auto& info : channel_mixer_infos()) {
    if (info.name == "none") continue;
    for (Mode mode : kModes) {
      SCOPED_TRACE(info.name + ", " + name_of(mode));
      torch::manual_seed(3);
      auto reference = build_channel_mixer(info.name, kDim);
      torch::manual_seed(3);
      auto low = build_channel_mixer(info.name, kDim);
      InMode{mode}.to_mode(*low);
      InMode{mode}.to_reference(*reference);
      const auto x = torch::randn({kBatch, kLength, kDim}, at::make_generator<at::CPUGeneratorImpl>(5));
      add_to_report("channel " + info.name, mode,
                    compare_forward_backward(info.name, mode, *reference, *low, x,
                                             [](torch::nn::Module& m, const torch::Tensor& input) {
                                               return dynamic_cast<ChannelMixerImpl&>(m).forward(input);
                                             }));
    }
  }
}

// ---- models ---------------------------------------------------------------------------------------------------

// A small task for each registered model (the test fails when a model has none), its batch the model's input.
std::string task_for(const std::string& model) {
  const std::string ett = "ett:path=" +
                          (std::filesystem::path(__FILE__).parent_path().parent_path() / "data/ett_tiny.csv").string() +
                          ",input_len=16,horizon=4,train_rows=60,val_rows=20,test_rows=20";
  const std::map<std::string, std::string> tasks = {
      {"lm", "mad.in_context_recall:num_train=8,num_test=4"},
      {"autoencoder", "mad.compression:num_train=8,num_test=4"},
      {"probe", "argmax:num_train=8,num_test=4,seq_len=8,dim=8"},
      {"forecaster", ett},
      {"dlinear", ett},
      {"vit", "fashion_mnist:num_train=8,num_val=4"},  // Debian's dataset-fashion-mnist
  };
  const auto found = tasks.find(model);
  return found == tasks.end() ? "" : found->second;
}

SequenceModel seeded_model(const std::string& model, const Task& task) {
  std::vector<std::string> specs;
  if (model == "probe") specs = {"fem:heads=2"};  // one mixer, read at the last position
  else if (model == "vit") specs = {"fem:heads=2,causal=0", "linear:heads=2,causal=0"};  // an encoder
  else if (model_takes_mixers(model)) specs = {"fem:prior=gla,heads=2", "softmax:heads=2"};
  std::vector<MixerSpec> mixers;
  for (const auto& spec : specs) mixers.push_back(parse_mixer_spec(spec));
  torch::manual_seed(3);
  return build_model(model, model_context_for(task, mixers));
}

TEST(ReducedPrecision, EveryModelStaysCloseToFloat32AndTheLanguageModelDecodes) {
  for (const auto& info : model_infos()) {
    const std::string task_spec = task_for(info.name);
    ASSERT_FALSE(task_spec.empty()) << "model " << info.name << " has no task in this test";
    auto task = build_task(task_spec);
    const Batch batch = task->train_batch(0, 2);
    for (Mode mode : kModes) {
      SCOPED_TRACE(info.name + ", " + name_of(mode));
      auto reference = seeded_model(info.name, *task);
      auto low = seeded_model(info.name, *task);
      InMode{mode}.to_mode(*low);
      InMode{mode}.to_reference(*reference);
      Errors e = compare_forward_backward("model " + info.name, mode, *reference, *low, batch.inputs,
                                          [](torch::nn::Module& m, const torch::Tensor& input) {
                                            return dynamic_cast<SequenceModelImpl&>(m).forward(input);
                                          });
      if (auto* lm = dynamic_cast<LanguageModelImpl*>(low.get())) {
        torch::NoGradGuard no_grad;
        const auto tokens = batch.inputs;
        const auto logits_ref = reference->forward(tokens);
        const AutocastGuard autocast(InMode{mode}.autocast());
        auto state = lm->init_state(tokens.size(0));
        std::vector<torch::Tensor> logits{lm->prefill(tokens.narrow(1, 0, 3), state)};
        for (int64_t t = 3; t < tokens.size(1); ++t)
          logits.push_back(lm->step(tokens.select(1, t), state).unsqueeze(1));
        e.decode = expect_close("lm decode", mode, torch::cat(logits, 1), logits_ref, kOutputTolerance);
      }
      add_to_report("model " + info.name, mode, e);
    }
  }
}

}  // namespace
}  // namespace seqmix

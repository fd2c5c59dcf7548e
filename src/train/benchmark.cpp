#include "seqmix/train/benchmark.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "seqmix/dist/communicator.h"
#include "seqmix/dist/gradient_averager.h"
#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/tasks/task.h"
#include "seqmix/tasks/text_lm.h"
#include "seqmix/train/run.h"

namespace seqmix {
namespace {

using Tensors = std::vector<at::Tensor>;

at::Tensor leaf(const at::Tensor& t) { return t.detach().requires_grad_(); }

double median_ms(int repeats, const std::function<void()>& run) {
  if (repeats < 1) throw Error("bench needs at least one timed repeat (got " + std::to_string(repeats) + ")");
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const size_t mid = ms.size() / 2;
  return ms.size() % 2 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]);
}

bool all_finite(const at::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

}  // namespace

std::vector<std::string> bench_op_names() {
  std::vector<std::string> names;
  for (const auto* c : ops::bench_cases()) names.push_back(c->name);
  return names;
}

BenchCase::BenchCase(std::function<std::vector<at::Tensor>()> forward, std::vector<at::Tensor> leaves,
                     Precision autocast)
    : forward_(std::move(forward)), leaves_(std::move(leaves)), autocast_(autocast) {}

std::vector<at::Tensor> BenchCase::forward() const {
  torch::NoGradGuard no_grad;
  const AutocastGuard autocast(autocast_);
  return forward_();
}

void BenchCase::forward_backward() {
  for (auto& l : leaves_) l.mutable_grad().reset();
  Tensors outputs;
  const Tensors all = [&] {
    const AutocastGuard autocast(autocast_);
    return forward_();
  }();
  for (const auto& o : all)
    if (o.requires_grad()) outputs.push_back(o);
  if (upstream_.empty())
    for (const auto& o : outputs) upstream_.push_back(torch::randn_like(o));
  torch::autograd::backward(outputs, upstream_);
}

void BenchCase::check_finite(const std::string& what) const {
  for (const auto& o : forward())
    if (!all_finite(o)) throw Error(what + " returned non-finite values");
  for (const auto& l : leaves_)
    if (l.grad().defined() && !all_finite(l.grad())) throw Error(what + " returned non-finite gradients");
}

BenchCase make_op_case(const std::string& op, const std::string& impl, const OpShape& shape, Precision precision) {
  const ops::BenchCaseDeclaration& declaration = ops::bench_case(op);
  const ops::Impl chosen = ops::check_impl(ops::parse_impl(impl), declaration.impls, op, c10::Device(c10::kCPU));
  torch::manual_seed(0);
  ops::OpCase inputs = declaration.make(chosen, shape);
  // In place, so the case's forward, which holds the same tensors, reads them in bfloat16.
  if (precision == Precision::bf16)
    for (auto& l : inputs.leaves) l.set_data(l.detach().to(torch::kBFloat16));
  return BenchCase(std::move(inputs.run), std::move(inputs.leaves));
}

BenchCase make_mixer_case(const MixerSpec& spec, int64_t batch, int64_t length, int64_t dim, Precision precision) {
  torch::manual_seed(0);
  MixerContext context;
  context.dim = dim;
  context.max_len = length;
  const Mixer mixer = build_mixer(spec, context);
  const auto x = leaf(torch::randn({batch, length, dim}));
  Tensors leaves = mixer->parameters();
  leaves.push_back(x);
  return BenchCase([mixer, x] { return Tensors{mixer->forward(x)}; }, std::move(leaves), precision);
}

LanguageModelSetup language_model_setup(const std::string& config_path) {
  Config config(run_config_schema());
  config.merge_yaml_file(config_path);
  const TaskSpec task(config.text("task"));
  if (task.name() != "text")
    throw Error(config_path + ": bench --config times language models of the text task, not task '" + task.name() +
                "'");
  const auto& text = std::any_cast<const TextOptions&>(task.options);
  LanguageModelSetup setup;
  setup.vocab_size = text.vocab_size;
  setup.seq_len = text.seq_len;
  setup.model = ModelSpec(config.text("model").empty() ? "lm" : config.text("model"));
  if (setup.model.name() != "lm")
    throw Error(config_path + ": bench --config times model lm, not '" + setup.model.name() + "'");
  for (const auto& m : config.list("mixer")) setup.mixers.push_back(parse_mixer_spec(m));
  return setup;
}

BenchCase make_language_model_case(const LanguageModelSetup& setup, int64_t batch, int64_t length,
                                   Precision precision) {
  if (length > setup.seq_len)
    throw Error("--shape T=" + std::to_string(length) + " is longer than the config's seq_len " +
                std::to_string(setup.seq_len) + ", which sizes its model");
  torch::manual_seed(0);
  ModelContext context;
  context.vocab_size = setup.vocab_size;
  context.seq_len = setup.seq_len;  // the config's model (HyperGLU's mixing and learned positions depend on it)
  context.mixers = setup.mixers;
  const SequenceModel model = build_model(setup.model, context);
  const auto tokens = torch::randint(setup.vocab_size, {batch, length}, torch::kLong);
  return BenchCase([model, tokens] { return Tensors{model->forward(tokens)}; }, model->parameters(), precision);
}

BenchTimes time_case(BenchCase& bench_case, const BenchSettings& settings, const std::string& what) {
  BenchTimes times;
  for (int i = 0; i < settings.warmup; ++i) bench_case.forward();
  bench_case.check_finite(what);
  times.fwd_ms = median_ms(settings.repeats, [&] { bench_case.forward(); });
  if (settings.backward) {
    for (int i = 0; i < settings.warmup; ++i) bench_case.forward_backward();
    bench_case.forward_backward();
    bench_case.check_finite(what);
    times.fwdbwd_ms = median_ms(settings.repeats, [&] { bench_case.forward_backward(); });
  }
  return times;
}

std::optional<double> op_forward_flops(const std::string& op, const OpShape& shape) {
  return ops::bench_case(op).forward_flops(shape);
}

double peak_resident_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    double kib = 0;
    fields >> kib;
    return kib / 1024;
  }
  return 0;
}

DataParallelStepTimes time_data_parallel_step(const std::string& spec, int64_t batch, int64_t length, int64_t dim,
                                              dist::Communicator& communicator, const BenchSettings& settings) {
  torch::manual_seed(0);
  MixerContext context;
  context.dim = dim;
  context.max_len = length;
  const Mixer mixer = build_mixer(spec, context);
  // Each rank its own data; the weights are rank 0's, as in training.
  torch::manual_seed(1000 + static_cast<uint64_t>(communicator.rank()));
  const auto x = torch::randn({batch, length, dim});
  const auto upstream = torch::randn({batch, length, dim});
  std::vector<at::Tensor> parameters = mixer->parameters();
  {
    torch::NoGradGuard no_grad;
    communicator.broadcast(parameters, "the mixer's weights");
  }
  // Shared ownership for the averager without owning the caller's communicator.
  std::shared_ptr<dist::Communicator> shared(&communicator, [](dist::Communicator*) {});
  dist::GradientAverager averager(shared, parameters);
  auto synchronise = [&] {
    auto token = torch::zeros({1});
    communicator.all_reduce_sum(token, "a synchronisation token");
  };

  using Clock = std::chrono::steady_clock;
  auto ms_between = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  std::vector<double> steps, all_reduces;
  for (int i = 0; i < settings.warmup + settings.repeats; ++i) {
    for (auto& p : parameters) p.mutable_grad() = at::Tensor();
    synchronise();
    const auto start = Clock::now();
    mixer->forward(x).backward(upstream);
    const auto backward_done = Clock::now();
    averager.average();
    synchronise();
    const auto end = Clock::now();
    if (i < settings.warmup) continue;
    steps.push_back(ms_between(start, end));
    all_reduces.push_back(ms_between(backward_done, end));
  }
  for (const auto& p : parameters)
    if (p.grad().defined() && !torch::isfinite(p.grad()).all().item<bool>())
      throw Error("bench: mixer " + spec + " gave a non-finite gradient");
  DataParallelStepTimes times;
  times.step_ms = median(steps);
  times.all_reduce_ms = median(all_reduces);
  for (const auto& p : parameters) times.parameters += p.numel();
  return times;
}


}  // namespace seqmix

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
#include "seqmix/ops/aft.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/ela.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/ssm.h"
#include "seqmix/tasks/task.h"
#include "seqmix/train/run.h"

namespace seqmix {
namespace {

using Tensors = std::vector<at::Tensor>;

at::Tensor leaf(const at::Tensor& t) { return t.detach().requires_grad_(); }
// Non-negative features (a normalised linear read): relu(x) + 1e-6.
at::Tensor features(at::IntArrayRef shape) { return leaf(torch::relu(torch::randn(shape)) + 1e-6); }

BenchCase attention_case(ops::Impl impl, const OpShape& s) {
  const auto q = leaf(torch::randn({s.batch, s.length, s.heads, s.dk}));
  const auto k = leaf(torch::randn({s.batch, s.length, s.heads, s.dk}));
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads, s.dv}));
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  return BenchCase(
      [=] { return Tensors{ops::softmax_attention(q, k, v, true, scale, {}, impl)}; },
      {q, k, v});
}

BenchCase fem_softmax_read_case(ops::Impl impl, const OpShape& s) {
  const bool fused = ops::runs_fused(impl, "fem_softmax_read");
  const auto q = leaf(torch::randn({s.batch, s.length, s.heads, s.dk}));
  const auto k = leaf(torch::randn({s.batch, s.length, s.heads, s.dk}));
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads, s.dv}));
  const auto beta = leaf(torch::softplus(torch::randn({s.heads * s.dv})) + 0.5);
  const double cap = 40, scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  return BenchCase(
      [=] {
        const ops::FemRead r = fused ? ops::fem_softmax_read_fused(q, k, v, beta, cap, true, scale)
                                     : ops::fem_softmax_read_naive(q, k, v, beta, cap, true, scale);
        return Tensors{r.mean, r.free_energy};
      },
      {q, k, v, beta});
}

BenchCase linear_attention_case(ops::Impl impl, const OpShape& s) {
  const bool fused = ops::runs_fused(impl, "linear_attention");
  const auto q = features({s.batch, s.length, s.heads, s.dk});
  const auto k = features({s.batch, s.length, s.heads, s.dk});
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads, s.dv}));
  return BenchCase(
      [=] {
        const ops::PriorRead r =
            fused ? ops::linear_attention_fused(q, k, v, true) : ops::linear_attention_naive(q, k, v, true);
        return Tensors{r.numerator, r.normaliser};
      },
      {q, k, v});
}

// GLA's read with a gentle decay, log_decay = logsigmoid(randn) / 16 [B,T,H].
BenchCase gla_read_case(bool fused, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, Tensors leaves) {
  const auto log_decay = leaf(torch::log_sigmoid(torch::randn({q.size(0), q.size(1), q.size(2)})) / 16);
  leaves.push_back(log_decay);
  return BenchCase(
      [=] {
        const ops::PriorRead r = fused ? ops::gla_fused(q, k, v, log_decay) : ops::gla_naive(q, k, v, log_decay);
        return Tensors{r.numerator, r.normaliser};
      },
      std::move(leaves));
}

BenchCase gla_case(ops::Impl impl, const OpShape& s) {
  const bool fused = ops::runs_fused(impl, "gla");
  const auto q = features({s.batch, s.length, s.heads, s.dk});
  const auto k = features({s.batch, s.length, s.heads, s.dk});
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads, s.dv}));
  return gla_read_case(fused, q, k, v, {q, k, v});
}

// LRNN-decay: GLA with unit features q = k = 1 of width 1 (constants, not leaves); dk is not used.
BenchCase lrnn_decay_case(ops::Impl impl, const OpShape& s) {
  const bool fused = ops::runs_fused(impl, "lrnn_decay");
  const auto ones = torch::ones({s.batch, s.length, s.heads, 1});
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads, s.dv}));
  return gla_read_case(fused, ones, ones, v, {v});
}

// Per-channel keys and values [B,T,C], C = H*dv; dk is not used.
BenchCase aft_case(ops::Impl impl, const OpShape& s) {
  const bool fused = ops::runs_fused(impl, "aft");
  const auto k = leaf(torch::randn({s.batch, s.length, s.heads * s.dv}));
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads * s.dv}));
  return BenchCase(
      [=] {
        const ops::PriorRead r = fused ? ops::aft_fused(k, v) : ops::aft_naive(k, v);
        return Tensors{r.numerator, r.normaliser};
      },
      {k, v});
}

// Channels C = H*dv, states N = dk: u [B,T,C], delta > 0 [B,T,C], A < 0 [C,N], b, c >= 0 [B,T,N].
BenchCase ssm_case(ops::Impl impl, const OpShape& s) {
  const bool fused = ops::runs_fused(impl, "ssm");
  const int64_t channels = s.heads * s.dv;
  const auto u = leaf(torch::randn({s.batch, s.length, channels}));
  const auto delta = leaf(torch::softplus(torch::randn({s.batch, s.length, channels})));
  const auto A = leaf(-torch::exp(0.5 * torch::randn({channels, s.dk})));
  const auto b = leaf(torch::rand({s.batch, s.length, s.dk}));
  const auto c = leaf(torch::rand({s.batch, s.length, s.dk}));
  return BenchCase(
      [=] { return Tensors{fused ? ops::ssm_scan_fused(u, delta, A, b, c) : ops::ssm_scan_naive(u, delta, A, b, c)}; },
      {u, delta, A, b, c});
}

// Exact Linear Attention, causal, q k v ~ N(0, 1): Hadamard Exp runs the fused running-max scan, the
// squared-Euclidean kernel linear attention's chunked scan on its dk+2 features.
BenchCase ela_case(const std::string& kernel_name, bool fused, const OpShape& s) {
  const auto q = leaf(torch::randn({s.batch, s.length, s.heads, s.dk}));
  const auto k = leaf(torch::randn({s.batch, s.length, s.heads, s.dk}));
  const auto v = leaf(torch::randn({s.batch, s.length, s.heads, s.dv}));
  const ops::ExactKernel& kernel = ops::exact_kernel(kernel_name);
  return BenchCase(
      [=, &kernel] {
        return Tensors{fused ? ops::ela_fused(q, k, v, kernel, true) : ops::ela_naive(q, k, v, kernel, true)};
      },
      {q, k, v});
}
BenchCase ela_hadamard_case(ops::Impl impl, const OpShape& s) {
  return ela_case("hadamard_exp", ops::runs_fused(impl, "ela"), s);
}
BenchCase ela_sum_sq_case(ops::Impl impl, const OpShape& s) {
  return ela_case("sum_sq_euclidean", ops::runs_fused(impl, "ela_sum_sq"), s);
}

struct OpEntry {
  std::string name;
  BenchCase (*make)(ops::Impl impl, const OpShape& shape);
};

const std::vector<OpEntry>& op_table() {
  static const std::vector<OpEntry> table = {{"attention", attention_case},
                                             {"fem_softmax_read", fem_softmax_read_case},
                                             {"linear_attention", linear_attention_case},
                                             {"gla", gla_case},
                                             {"aft", aft_case},
                                             {"lrnn_decay", lrnn_decay_case},
                                             {"ssm", ssm_case},
                                             {"ela", ela_hadamard_case},
                                             {"ela_sum_sq", ela_sum_sq_case}};
  return table;
}


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

const std::vector<std::string>& bench_op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& e : op_table()) out.push_back(e.name);
    return out;
  }();
  return names;
}


BenchCase::BenchCase(std::function<std::vector<at::Tensor>()> forward, std::vector<at::Tensor> leaves)
    : forward_(std::move(forward)), leaves_(std::move(leaves)) {}

std::vector<at::Tensor> BenchCase::forward() const {
  torch::NoGradGuard no_grad;
  return forward_();
}

void BenchCase::forward_backward() {
  for (auto& l : leaves_) l.mutable_grad().reset();
  Tensors outputs;
  for (auto& o : forward_())
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

BenchCase make_op_case(const std::string& op, const std::string& impl, const OpShape& shape) {
  const ops::Impl choice = ops::parse_impl(impl);
  for (const auto& e : op_table()) {
    if (e.name != op) continue;
    torch::manual_seed(0);
    return e.make(choice, shape);
  }
  throw Error("unknown op '" + op + "'; valid ops: " + join(bench_op_names()));
}

BenchCase make_mixer_case(const std::string& spec, int64_t batch, int64_t length, int64_t dim) {
  torch::manual_seed(0);
  MixerContext context;
  context.dim = dim;
  context.max_len = length;
  const Mixer mixer = build_mixer(spec, context);
  const auto x = leaf(torch::randn({batch, length, dim}));
  Tensors leaves = mixer->parameters();
  leaves.push_back(x);
  return BenchCase([mixer, x] { return Tensors{mixer->forward(x)}; }, std::move(leaves));
}

LanguageModelSetup language_model_setup(const std::string& config_path) {
  Config config(run_config_schema());
  config.merge_yaml_file(config_path);
  const Options task = component_options(task_infos(), "task", config.text("task"));
  if (Spec::parse(config.text("task")).name != "text")
    throw Error(config_path + ": bench --config times language models of the text task, not task '" +
                Spec::parse(config.text("task")).name + "'");
  LanguageModelSetup setup;
  setup.vocab_size = task.integer("vocab_size");
  setup.seq_len = task.integer("seq_len");
  const std::string model = config.text("model").empty() ? "lm" : config.text("model");
  if (Spec::parse(model).name != "lm")
    throw Error(config_path + ": bench --config times model lm, not '" + Spec::parse(model).name + "'");
  setup.model_spec = component_options(model_infos(), "model", model).resolved();
  for (const auto& m : config.list("mixer")) setup.mixers.push_back(resolve_mixer_spec(m));
  return setup;
}

BenchCase make_language_model_case(const LanguageModelSetup& setup, int64_t batch, int64_t length) {
  if (length > setup.seq_len)
    throw Error("--shape T=" + std::to_string(length) + " is longer than the config's seq_len " +
                std::to_string(setup.seq_len) + ", which sizes its model");
  torch::manual_seed(0);
  ModelContext context;
  context.vocab_size = setup.vocab_size;
  context.seq_len = setup.seq_len;  // the config's model (HyperGLU's mixing and learned positions depend on it)
  context.mixers = setup.mixers;
  const SequenceModel model = build_model(setup.model_spec, context);
  const auto tokens = torch::randint(setup.vocab_size, {batch, length}, torch::kLong);
  return BenchCase([model, tokens] { return Tensors{model->forward(tokens)}; }, model->parameters());
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

std::optional<double> op_forward_flops(const std::string& op, const OpShape& s) {
  const double B = s.batch, T = s.length, H = s.heads, dk = s.dk, dv = s.dv;
  const double causal_pairs = T * (T + 1) / 2;
  if (op == "attention") return 2 * B * H * causal_pairs * (dk + dv);
  if (op == "fem_softmax_read") return 2 * B * H * causal_pairs * (dk + 2 * dv);
  if (op == "linear_attention" || op == "gla" || op == "ela") return 4 * B * T * H * dk * dv;
  if (op == "ela_sum_sq") return 4 * B * T * H * (dk + 2) * dv;
  return std::nullopt;
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

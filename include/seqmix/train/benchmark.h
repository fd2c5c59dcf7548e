#pragma once
// Timing of the ops and mixers (`seqmix bench`, bench/*_bench.cpp): a case holds its inputs, created once,
// and runs forward (no autograd) or forward+backward (a fixed random upstream gradient into the leaves).
#include <ATen/core/Tensor.h>

#include "seqmix/layers/mixer_spec.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/train/precision.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace seqmix {
namespace dist {
class Communicator;
}

// B, T, H, dk, dv of an op benchmark; ops on [B,T,C] channels use C = H*dv.
using OpShape = ops::OpShape;

// The op table's benchmark cases, in its order (attention, fem_softmax_read, linear_attention, gla, ...).
std::vector<std::string> bench_op_names();

class BenchCase {
 public:
  // forward computes the outputs from inputs it holds; leaves are those inputs (and parameters) that
  // take gradients. The forward runs under `autocast` (as a run's forward does; the backward outside it).
  BenchCase(std::function<std::vector<at::Tensor>()> forward, std::vector<at::Tensor> leaves,
            Precision autocast = Precision::fp32);

  // The outputs, computed without autograd.
  std::vector<at::Tensor> forward() const;
  // Forward, then backward of the fixed upstream gradient (drawn on the first call) into the leaves,
  // whose gradients are reset first.
  void forward_backward();
  // Throws Error "<what> returned non-finite ..." unless the outputs, and after forward_backward the
  // leaves' gradients, are all finite.
  void check_finite(const std::string& what) const;

 private:
  std::function<std::vector<at::Tensor>()> forward_;
  std::vector<at::Tensor> leaves_;
  std::vector<at::Tensor> upstream_;
  Precision autocast_;
};

// The op table's benchmark case `op` (its inputs at `shape`, seed 0) with implementation `impl`, its inputs in
// `precision` (bf16: the float32 inputs rounded to bfloat16; the op computes in float32 and returns bfloat16).
// Throws Error for an unknown op or an impl the op lacks.
BenchCase make_op_case(const std::string& op, const std::string& impl, const OpShape& shape,
                       Precision precision = Precision::fp32);
// A mixer built from spec for width dim (max_len = length) on randn [batch, length, dim] inputs, its forward in
// `precision` (bf16: under autocast, float32 weights, as `seqmix train --dtype bf16` runs it).
BenchCase make_mixer_case(const MixerSpec& spec, int64_t batch, int64_t length, int64_t dim,
                          Precision precision = Precision::fp32);

// What `seqmix bench --config` times: the language model of a run config of the text task.
struct LanguageModelSetup {
  ModelSpec model = "lm";           // the config's lm spec, parsed
  std::vector<MixerSpec> mixers;  // parsed once, from the config
  int64_t vocab_size = 0;           // the text task's vocab_size option
  int64_t seq_len = 0;              // its seq_len: the model is built for it; benchmarks take T <= seq_len
};
// Reads the config's task, model and mixer keys; throws Error naming the file when its task is not text or
// its model not lm.
LanguageModelSetup language_model_setup(const std::string& config_path);
// The model (seed 0, built for the config's seq_len) on random token ids [batch, length <= seq_len]; the
// output is the logits [batch, length, vocab].
// Its parameters are the leaves (token ids take no gradient), so forward+backward is a training step
// without the optimizer update.
BenchCase make_language_model_case(const LanguageModelSetup& setup, int64_t batch, int64_t length,
                                   Precision precision = Precision::fp32);

struct BenchSettings {
  int warmup = 2;
  int repeats = 5;
  bool backward = false;  // also time forward+backward
};

struct BenchTimes {
  double fwd_ms = 0;
  std::optional<double> fwdbwd_ms;  // with BenchSettings::backward
};

// Medians of `repeats` runs after `warmup` runs; checks the results are finite once (naming `what`).
BenchTimes time_case(BenchCase& bench_case, const BenchSettings& settings, const std::string& what);

// Model flops of one forward where the op table gives a standard count (e.g. causal attention
// 2 B H T(T+1)/2 (dk + dv)); nullopt for the elementwise scans (aft, lrnn_decay, ssm).
std::optional<double> op_forward_flops(const std::string& op, const OpShape& shape);
// Forward+backward flops by convention: 3.5 x the forward's (the backward as 2.5 forwards).
constexpr double kForwardBackwardFlopFactor = 3.5;

// `seqmix bench --model SPEC --nproc N`: data-parallel training of a mixer. Every rank holds its own randn
// [batch, length, dim] input and the same mixer (rank 0's weights); one step is forward, backward and the
// averaging of the parameter gradients over the ranks (dist::GradientAverager), so N ranks train on
// N x batch sequences per step (weak scaling).
struct DataParallelStepTimes {
  double step_ms = 0;       // median step, measured on rank 0 between two synchronisations of all ranks
  double all_reduce_ms = 0; // median time of the gradient averaging within the step (incl. waiting for peers)
  int64_t parameters = 0;   // the mixer's parameter count (what the all-reduce carries)
};

DataParallelStepTimes time_data_parallel_step(const std::string& spec, int64_t batch, int64_t length, int64_t dim,
                                              dist::Communicator& communicator, const BenchSettings& settings);

// This process's peak resident memory (VmHWM) in MiB; 0 when /proc is unavailable.
double peak_resident_mib();

}  // namespace seqmix

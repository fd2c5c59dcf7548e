// seqmix generate: samples a continuation of a prompt from a text run's checkpoint, decoding step by step
// through the mixers' recurrent states.
#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "commands.h"
#include "seqmix/train/device.h"
#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/io/runtime.h"
#include "seqmix/models/language_model.h"
#include "seqmix/tasks/text_lm.h"
#include "seqmix/train/run.h"

namespace seqmix::cli {
namespace {

struct GenerateArgs {
  std::string run, prompt = "\n", prompt_file;
  int64_t step = -1, tokens = 200, top_k = 0, samples = 1;
  double temperature = 1.0;
  uint64_t seed = 0;
  int threads = 0;
  std::string device = "cpu";
};

int run_generate(const GenerateArgs& a) {
  if (a.tokens < 0) throw Error("--tokens must be >= 0");
  if (a.samples < 1) throw Error("--samples must be >= 1");
  if (!(std::isfinite(a.temperature) && a.temperature >= 0))
    throw Error("--temperature must be a finite number >= 0 (0 = greedy), got " + (std::ostringstream() << a.temperature).str());
  // The samples are held whole: [samples, prompt + tokens] int64, checked before the run is loaded.
  if (static_cast<double>(a.samples) * (static_cast<double>(a.tokens) + 1) * 8 >
      static_cast<double>(physical_memory_bytes()))
    throw Error("--tokens " + std::to_string(a.tokens) + " with --samples " + std::to_string(a.samples) +
                ": the samples would not fit in this machine's memory");
  if (a.top_k < 0) throw Error("--top-k must be >= 0 (0 = the whole vocabulary)");
  parse_device(a.device, "--device");
  int64_t step = 0;
  Run run = load_run(a.run, a.threads, a.step, step, "", {}, a.device);
  const auto* text = dynamic_cast<const TextTask*>(run.task.get());
  if (!text) throw Error("generate needs a run of the text task; " + a.run + " trained on " + run.task->name());
  auto model = std::dynamic_pointer_cast<LanguageModelImpl>(run.model);
  if (!model) throw Error("generate needs an lm model; " + a.run + " holds " + run.model_spec);
  model->eval();

  const std::string prompt = a.prompt_file.empty() ? a.prompt : read_file(a.prompt_file);
  const auto ids = text->tokenizer().encode(prompt);
  if (ids.empty()) throw Error("the prompt is empty; give at least one character");
  auto prompt_tokens = torch::tensor(ids, torch::kLong).unsqueeze(0).repeat({a.samples, 1}).to(run.train.device);
  Sampling sampling;
  sampling.temperature = a.temperature;
  sampling.top_k = a.top_k;
  sampling.seed = a.seed;
  const auto out = [&] {
    const AutocastGuard autocast(run.train.precision, run.train.device.type());  // decode as the run trained
    return model->generate(prompt_tokens, a.tokens, sampling).cpu();
  }();
  for (int64_t s = 0; s < a.samples; ++s) {
    auto row = out[s].contiguous();
    std::vector<int64_t> all(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    if (a.samples > 1) std::printf("--- sample %lld (checkpoint step %lld)\n", static_cast<long long>(s + 1),
                                   static_cast<long long>(step));
    std::printf("%s\n", text->tokenizer().decode(all).c_str());
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "sample text from a text run's checkpoint (step-by-step decoding)");
  sub->add_option("--run", a->run, "run directory of a text task")->required();
  sub->add_option("--step", a->step, "checkpoint step (default: the latest)");
  sub->add_option("--prompt", a->prompt, "text to continue (default: a newline)");
  sub->add_option("--prompt-file", a->prompt_file, "read the prompt from this file instead");
  sub->add_option("--tokens", a->tokens, "tokens to generate (default 200)");
  sub->add_option("--temperature", a->temperature, "sampling temperature; 0 = greedy (default 1)");
  sub->add_option("--top-k", a->top_k, "sample among the k most likely tokens; 0 = all (default 0)");
  sub->add_option("--samples", a->samples, "independent samples of the same prompt (default 1)");
  sub->add_option("--seed", a->seed, "sampling seed (default 0)");
  sub->add_option("--threads", a->threads, "intra-op threads (0 = all hardware threads)");
  sub->add_option("--device", a->device, "cpu (default), cuda or cuda:N: where the model decodes");
  sub->callback([&action, a] { action = [a] { return run_generate(*a); }; });
}

}  // namespace seqmix::cli

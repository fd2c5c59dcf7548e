// The built-in tasks and their options.
#include <functional>

#include "seqmix/io/error.h"
#include "seqmix/tasks/mad/recall.h"
#include "seqmix/tasks/task.h"

namespace seqmix {
namespace {

using TaskBuilder = std::function<std::unique_ptr<Task>(const Options&)>;
struct TaskEntry {
  ComponentInfo info;
  TaskBuilder build;
};

std::vector<OptionInfo> recall_options(int64_t vocab, int64_t noise_vocab, double frac_noise) {
  return {OptionInfo::integer("vocab_size", vocab, "vocabulary size (noise tokens included)", 4),
          OptionInfo::integer("seq_len", 128, "MAD sequence length L (the model sees L-1 tokens)", 4),
          OptionInfo::integer("num_train", 12800, "training examples", 1),
          OptionInfo::integer("num_test", 1280, "test examples", 1),
          OptionInfo::integer("noise_vocab_size", noise_vocab, "top token ids used as noise", 0),
          OptionInfo::real("frac_noise", frac_noise, "share of 2-token slots filled with noise", 0.0, 0.999999),
          OptionInfo::flag("multi_query", true, "score every repeated key (MAD's setting)"),
          OptionInfo::integer("seed", 12345, "data seed", 0)};
}

RecallOptions read_recall(const Options& o) {
  RecallOptions r;
  r.vocab_size = o.integer("vocab_size");
  r.seq_len = o.integer("seq_len");
  r.num_train = o.integer("num_train");
  r.num_test = o.integer("num_test");
  r.noise_vocab_size = o.integer("noise_vocab_size");
  r.frac_noise = o.real("frac_noise");
  r.multi_query = o.flag("multi_query");
  r.seed = static_cast<uint64_t>(o.integer("seed"));
  return r;
}

const std::vector<TaskEntry>& task_entries() {
  static const std::vector<TaskEntry> entries = {
      {{"mad.in_context_recall", "MAD in-context recall: values of repeated keys in a fresh key-value map",
        recall_options(16, 0, 0.0)},
       [](const Options& o) -> std::unique_ptr<Task> {
         return std::make_unique<RecallTask>("mad.in_context_recall", read_recall(o), o.resolved());
       }},
      {{"mad.noisy_recall", "MAD noisy in-context recall: recall with noise-token slots interleaved",
        recall_options(32, 16, 0.2)},
       [](const Options& o) -> std::unique_ptr<Task> {
         return std::make_unique<RecallTask>("mad.noisy_recall", read_recall(o), o.resolved());
       }},
  };
  return entries;
}

}  // namespace

const std::vector<ComponentInfo>& task_infos() {
  static const std::vector<ComponentInfo> infos = [] {
    std::vector<ComponentInfo> out;
    for (const auto& e : task_entries()) out.push_back(e.info);
    return out;
  }();
  return infos;
}

std::unique_ptr<Task> build_task(const std::string& spec) {
  const Options options = component_options(task_infos(), "task", spec);
  const std::string name = Spec::parse(spec).name;
  for (const auto& e : task_entries())
    if (e.info.name == name) return e.build(options);
  throw std::logic_error("task registry: entry vanished");
}

}  // namespace seqmix

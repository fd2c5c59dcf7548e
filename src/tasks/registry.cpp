// The built-in tasks and their options (MAD defaults from specs/mad.md).
#include <filesystem>
#include <functional>

#include "seqmix/io/built_within_limits.h"
#include "seqmix/io/error.h"
#include "seqmix/tasks/argmax.h"
#include "seqmix/tasks/fashion_mnist.h"
#include "seqmix/tasks/mad/fuzzy_recall.h"
#include "seqmix/tasks/mad/recall.h"
#include "seqmix/tasks/mad/token_tasks.h"
#include "seqmix/tasks/mqar.h"
#include "seqmix/tasks/time_series.h"
#include "seqmix/tasks/task.h"
#include "seqmix/tasks/text_lm.h"

namespace seqmix {
namespace {

using TaskBuilder = std::function<std::unique_ptr<Task>(const Options&)>;
struct TaskEntry {
  ComponentInfo info;
  TaskBuilder build;
};

OptionInfo vocab(int64_t v) {
  return OptionInfo::integer("vocab_size", v, "vocabulary size (special tokens included)", 4, 1 << 24);
}
OptionInfo length(int64_t l, const char* meaning) { return OptionInfo::integer("seq_len", l, meaning, 4, 1 << 20); }
OptionInfo train_size(int64_t n) { return OptionInfo::integer("num_train", n, "training examples", 1, 1e8); }
OptionInfo test_size(int64_t n) { return OptionInfo::integer("num_test", n, "test examples", 1, 1e7); }
OptionInfo seed(int64_t s = 12345) { return OptionInfo::integer("seed", s, "data seed", 0); }
OptionInfo noise_size(const char* meaning, int64_t n = 0) { return OptionInfo::integer("noise_vocab_size", n, meaning, 0); }
OptionInfo noise_share(const char* meaning, double f = 0.0) { return OptionInfo::real("frac_noise", f, meaning, 0.0, 0.999999); }
OptionInfo multi_query() { return OptionInfo::flag("multi_query", true, "score every repeated key (MAD's setting)"); }
uint64_t seed_of(const Options& o) { return static_cast<uint64_t>(o.integer("seed")); }

std::vector<OptionInfo> recall_options(int64_t v, int64_t noise_vocab, double frac_noise) {
  return {vocab(v),
          length(128, "MAD sequence length L (the model sees L-1 tokens)"),
          train_size(12800),
          test_size(1280),
          noise_size("top token ids used as noise", noise_vocab),
          noise_share("share of 2-token slots filled with noise", frac_noise),
          multi_query(),
          seed()};
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
  r.seed = seed_of(o);
  return r;
}

const std::vector<TaskEntry>& task_entries() {
  static const std::vector<TaskEntry> entries = {
      {{"mad.in_context_recall", "MAD in-context recall: values of repeated keys in a fresh key-value map",
        recall_options(16, 0, 0.0)},
       [](const Options& o) -> std::unique_ptr<Task> {
         return std::make_unique<RecallTask>("mad.in_context_recall", read_recall(o), o.resolved());
       }},
      {{"mad.fuzzy_recall", "MAD fuzzy recall: keys and values are multi-token motifs; test keys have length K",
        {vocab(16), length(128, "tokens the model sees (left-padded)"), train_size(12800), test_size(1280),
         OptionInfo::integer("key_len", 3, "longest key motif K", 1), OptionInfo::integer("value_len", 3, "longest value motif", 1),
         noise_size("token ids used as noise, just below the pad token"),
         noise_share("share of pair slots filled with noise"), multi_query(), seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         FuzzyRecallOptions f;
         f.vocab_size = o.integer("vocab_size");
         f.seq_len = o.integer("seq_len");
         f.num_train = o.integer("num_train");
         f.num_test = o.integer("num_test");
         f.key_len = o.integer("key_len");
         f.value_len = o.integer("value_len");
         f.noise_vocab_size = o.integer("noise_vocab_size");
         f.frac_noise = o.real("frac_noise");
         f.multi_query = o.flag("multi_query");
         f.seed = seed_of(o);
         return std::make_unique<FuzzyRecallTask>(f, o.resolved());
       }},
      {{"mad.noisy_recall", "MAD noisy in-context recall: recall with noise-token slots interleaved",
        recall_options(32, 16, 0.2)},
       [](const Options& o) -> std::unique_ptr<Task> {
         return std::make_unique<RecallTask>("mad.noisy_recall", read_recall(o), o.resolved());
       }},
      {{"mad.selective_copy", "MAD selective copying: copy the data tokens scattered among blanks, in order",
        {vocab(16), length(256, "tokens the model sees"), OptionInfo::integer("num_tokens_to_copy", 16, "data tokens n", 1),
         train_size(12800), test_size(1280), seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         SelectiveCopyOptions s;
         s.vocab_size = o.integer("vocab_size");
         s.seq_len = o.integer("seq_len");
         s.num_tokens_to_copy = o.integer("num_tokens_to_copy");
         s.num_train = o.integer("num_train");
         s.num_test = o.integer("num_test");
         s.seed = seed_of(o);
         if (s.seq_len <= 2 * s.num_tokens_to_copy + 1) throw Error("selective copy: seq_len must exceed 2 * num_tokens_to_copy + 1");
         if (s.vocab_size < 3) throw Error("selective copy: vocab_size must be >= 3");
         return std::make_unique<AlignedTokenTask>("mad.selective_copy", o.resolved(), s.vocab_size, s.seq_len, s.seed,
                                                   s.num_train, s.num_test,
                                                   [s](DataRng& r) { return selective_copy_example(s, r); });
       }},
      {{"mad.compression", "MAD compression: encode the sequence into its last position and decode it back",
        {vocab(16), length(32, "tokens the model sees"), train_size(12800), test_size(1280),
         noise_size("token ids used as noise, just below the compression token"),
         noise_share("chance that a data token is replaced by noise (the target stays the input)"), seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         CompressionOptions c;
         c.vocab_size = o.integer("vocab_size");
         c.seq_len = o.integer("seq_len");
         c.num_train = o.integer("num_train");
         c.num_test = o.integer("num_test");
         c.noise_vocab_size = o.integer("noise_vocab_size");
         c.frac_noise = o.real("frac_noise");
         c.seed = seed_of(o);
         validate(c);
         return std::make_unique<AlignedTokenTask>("mad.compression", o.resolved(), c.vocab_size, c.seq_len, c.seed,
                                                   c.num_train, c.num_test,
                                                   [c](DataRng& r) { return compression_example(c, r); }, "autoencoder");
       }},
      {{"mad.memorization", "MAD memorization: a fixed key-value map stored in the weights",
        {vocab(256), length(32, "tokens the model sees (even)"), train_size(256), test_size(1280),
         noise_size("token ids used as noise, just below the insert token"),
         noise_share("share of key/insert slots filled with two noise tokens"), seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         MemorizationOptions m;
         m.vocab_size = o.integer("vocab_size");
         m.seq_len = o.integer("seq_len");
         m.num_train = o.integer("num_train");
         m.num_test = o.integer("num_test");
         m.noise_vocab_size = o.integer("noise_vocab_size");
         m.frac_noise = o.real("frac_noise");
         m.seed = seed_of(o);
         validate(m);
         auto map = memorization_map(m);
         return std::make_unique<AlignedTokenTask>("mad.memorization", o.resolved(), m.vocab_size, m.seq_len, m.seed,
                                                   m.num_train, m.num_test,
                                                   [m, map](DataRng& r) { return memorization_example(m, map, r); });
       }},
      {{"mqar", "zoology's multi-query associative recall",
        {vocab(8192), length(64, "tokens the model sees (even)"),
         OptionInfo::integer("num_kv_pairs", 8, "key-value pairs D per sequence", 1),
         OptionInfo::real("power_a", 0.01, "query gaps drawn with weight i^(power_a - 1)", 1e-6, 10.0),
         OptionInfo::flag("random_non_queries", true, "fill non-query positions with random tokens"),
         OptionInfo::integer("num_passes", 1, "repetitions of the key-value context", 1, 1 << 20), train_size(100000),
         test_size(3000), seed(123)}},
       [](const Options& o) -> std::unique_ptr<Task> {
         MqarOptions m;
         m.vocab_size = o.integer("vocab_size");
         m.seq_len = o.integer("seq_len");
         m.num_kv_pairs = o.integer("num_kv_pairs");
         m.power_a = o.real("power_a");
         m.random_non_queries = o.flag("random_non_queries");
         m.num_passes = o.integer("num_passes");
         m.num_train = o.integer("num_train");
         m.num_test = o.integer("num_test");
         m.seed = seed_of(o);
         return std::make_unique<MqarTask>(m, o.resolved());
       }},
      {{"text", "next-token language modelling on a text file with a BPE vocabulary trained on its training split",
        {OptionInfo::text("path", "../shared/data/text/tinyshakespeare.txt", "UTF-8 text file"),
         length(256, "tokens per window"),
         OptionInfo::integer("vocab_size", 2048, "BPE pieces, special and byte pieces included", 300, 1 << 20),
         OptionInfo::real("val_fraction", 0.1, "share of the file (its end) held out for validation", 1e-6, 0.999999),
         OptionInfo::text("tokenizer", "", "SentencePiece .model to use (empty: train BPE on the training split)"),
         OptionInfo::integer("num_test", 0, "validation windows evaluated (0 = all)", 0),
         OptionInfo::choice("documents", "none", {"none", "lines", "paragraphs"},
                            "none: windows of one token stream; lines, paragraphs: documents read from their own start"),
         OptionInfo::flag("pack", false, "pack documents whole into full rows (no compute on padding; needs documents)"),
         seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         TextOptions t;
         t.path = o.text("path");
         t.seq_len = o.integer("seq_len");
         t.vocab_size = o.integer("vocab_size");
         t.val_fraction = o.real("val_fraction");
         t.tokenizer = o.text("tokenizer");
         t.num_test = o.integer("num_test");
         t.documents = o.text("documents");
         t.pack = o.flag("pack");
         t.seed = seed_of(o);
         return std::make_unique<TextTask>(t, o.resolved());
       }},
      {{"argmax", "FEM's channel-wise argmax toy: output the per-channel max of a [T,D] value matrix",
        {length(64, "positions T"), OptionInfo::integer("dim", 128, "channels D", 1),
         OptionInfo::real("margin", 1.0, "winner margin", 1e-9), OptionInfo::real("noise", 0.05, "noise std", 0.0),
         train_size(200000), test_size(2000), seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         ArgmaxOptions a;
         a.seq_len = o.integer("seq_len");
         a.dim = o.integer("dim");
         a.margin = o.real("margin");
         a.noise = o.real("noise");
         a.num_train = o.integer("num_train");
         a.num_test = o.integer("num_test");
         a.seed = seed_of(o);
         return std::make_unique<ArgmaxTask>(a, o.resolved());
       }},
      {{"fashion_mnist",
        "Fashion-MNIST image classification: 28x28 images as sequences of patches, 10 classes (Debian's "
        "dataset-fashion-mnist)",
        {OptionInfo::text("path", FashionMnistOptions{}.path, "folder of the four IDX files (.gz or not)"),
         OptionInfo::integer("patch", 4, "patch side: an image is (28/patch)^2 tokens of patch^2 pixels", 1, 28),
         train_size(55000), OptionInfo::integer("num_val", 5000, "training images held out for validation", 1, 59999),
         OptionInfo::choice("heldout", "val", {"val", "test"},
                            "the held-out set evaluations use: the validation split or the 10,000 test images"),
         seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         FashionMnistOptions f;
         f.path = o.text("path");
         f.patch = o.integer("patch");
         f.num_train = o.integer("num_train");
         f.num_val = o.integer("num_val");
         f.heldout = o.text("heldout");
         f.seed = seed_of(o);
         return std::make_unique<FashionMnistTask>(f, o.resolved());
       }},
      {{"ett", "multivariate time-series forecasting on a CSV table (ETT), Informer's split and z-scoring",
        {OptionInfo::text("path", "../shared/data/ett/ETTh1.csv", "CSV file with a header (a 'date' column is skipped)"),
         OptionInfo::integer("input_len", 96, "rows the model reads", 1, 1 << 20),
         OptionInfo::integer("horizon", 96, "rows it forecasts", 1, 1 << 20),
         OptionInfo::integer("train_rows", 8640, "rows of the training split (ETTh: 12 months)", 1),
         OptionInfo::integer("val_rows", 2880, "rows of the validation split, after the training rows", 0),
         OptionInfo::integer("test_rows", 2880, "rows of the test split, after the validation rows", 0),
         OptionInfo::choice("split", "test", {"test", "val"}, "the evaluation set"),
         OptionInfo::integer("stride", 1, "step between training windows", 1), seed()}},
       [](const Options& o) -> std::unique_ptr<Task> {
         TimeSeriesOptions t;
         t.path = std::filesystem::absolute(o.text("path")).lexically_normal().string();
         t.input_len = o.integer("input_len");
         t.horizon = o.integer("horizon");
         t.train_rows = o.integer("train_rows");
         t.val_rows = o.integer("val_rows");
         t.test_rows = o.integer("test_rows");
         t.split = o.text("split");
         t.stride = o.integer("stride");
         t.seed = seed_of(o);
         Spec resolved = Spec::parse(o.resolved());  // with the absolute path, so eval and resume find the file
         for (auto& [key, value] : resolved.options)
           if (key == "path") value = t.path;
         return std::make_unique<TimeSeriesTask>(t, resolved.str());
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
    if (e.info.name == name) return built_within_limits("task " + spec, [&] { return e.build(options); });
  throw std::logic_error("task registry: entry vanished");
}

}  // namespace seqmix

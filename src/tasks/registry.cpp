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

// The options most tasks share, bound to the task's options struct O (each default is O{}'s).
template <class O>
Field<O> vocab() {
  return Field<O>::integer("vocab_size", &O::vocab_size, "vocabulary size (special tokens included)", 4, 1 << 24);
}
template <class O>
Field<O> length(const char* meaning) {
  return Field<O>::integer("seq_len", &O::seq_len, meaning, 4, 1 << 20);
}
template <class O>
Field<O> train_size() {
  return Field<O>::integer("num_train", &O::num_train, "training examples", 1, 1e8);
}
template <class O>
Field<O> test_size() {
  return Field<O>::integer("num_test", &O::num_test, "test examples", 1, 1e7);
}
template <class O>
Field<O> seed() {
  return Field<O>::integer("seed", &O::seed, "data seed", 0);
}
template <class O>
Field<O> noise_size(const char* meaning) {
  return Field<O>::integer("noise_vocab_size", &O::noise_vocab_size, meaning, 0);
}
template <class O>
Field<O> noise_share(const char* meaning) {
  return Field<O>::real("frac_noise", &O::frac_noise, meaning, 0.0, 0.999999);
}
template <class O>
Field<O> multi_query() {
  return Field<O>::flag("multi_query", &O::multi_query, "score every repeated key (MAD's setting)");
}

template <class O>
std::vector<Field<O>> recall_fields() {
  return {vocab<O>(),
          length<O>("MAD sequence length L (the model sees L-1 tokens)"),
          train_size<O>(),
          test_size<O>(),
          noise_size<O>("top token ids used as noise"),
          noise_share<O>("share of 2-token slots filled with noise"),
          multi_query<O>(),
          seed<O>()};
}

// MAD's noisy recall: recall with its own defaults (a larger vocabulary, a fifth of the slots noise).
struct NoisyRecallOptions : RecallOptions {
  NoisyRecallOptions() {
    vocab_size = 32;
    noise_vocab_size = 16;
    frac_noise = 0.2;
  }
};

using TaskPointer = std::unique_ptr<Task>;

TaskPointer make_in_context_recall(const RecallOptions& o, const std::string& resolved) {
  return std::make_unique<RecallTask>("mad.in_context_recall", o, resolved);
}
TaskPointer make_noisy_recall(const NoisyRecallOptions& o, const std::string& resolved) {
  return std::make_unique<RecallTask>("mad.noisy_recall", o, resolved);
}
TaskPointer make_fuzzy_recall(const FuzzyRecallOptions& o, const std::string& resolved) {
  return std::make_unique<FuzzyRecallTask>(o, resolved);
}
TaskPointer make_selective_copy(const SelectiveCopyOptions& s, const std::string& resolved) {
  if (s.seq_len <= 2 * s.num_tokens_to_copy + 1)
    throw Error("selective copy: seq_len must exceed 2 * num_tokens_to_copy + 1");
  if (s.vocab_size < 3) throw Error("selective copy: vocab_size must be >= 3");
  return std::make_unique<AlignedTokenTask>("mad.selective_copy", resolved, s.vocab_size, s.seq_len, s.seed,
                                            s.num_train, s.num_test,
                                            [s](DataRng& r) { return selective_copy_example(s, r); });
}
TaskPointer make_compression(const CompressionOptions& c, const std::string& resolved) {
  validate(c);
  return std::make_unique<AlignedTokenTask>("mad.compression", resolved, c.vocab_size, c.seq_len, c.seed, c.num_train,
                                            c.num_test, [c](DataRng& r) { return compression_example(c, r); },
                                            "autoencoder");
}
TaskPointer make_memorization(const MemorizationOptions& m, const std::string& resolved) {
  validate(m);
  auto map = memorization_map(m);
  return std::make_unique<AlignedTokenTask>("mad.memorization", resolved, m.vocab_size, m.seq_len, m.seed,
                                            m.num_train, m.num_test,
                                            [m, map](DataRng& r) { return memorization_example(m, map, r); });
}
TaskPointer make_mqar(const MqarOptions& o, const std::string& resolved) {
  return std::make_unique<MqarTask>(o, resolved);
}
TaskPointer make_text(const TextOptions& o, const std::string& resolved) {
  return std::make_unique<TextTask>(o, resolved);
}
TaskPointer make_argmax(const ArgmaxOptions& o, const std::string& resolved) {
  return std::make_unique<ArgmaxTask>(o, resolved);
}
TaskPointer make_fashion_mnist(const FashionMnistOptions& o, const std::string& resolved) {
  return std::make_unique<FashionMnistTask>(o, resolved);
}
// The data file by its absolute path, in the options and the resolved spec, so eval and resume find it.
TaskPointer make_ett(const TimeSeriesOptions& o, const std::string& resolved) {
  TimeSeriesOptions t = o;
  t.path = std::filesystem::absolute(o.path).lexically_normal().string();
  Spec spec = Spec::parse(resolved);
  for (auto& [key, value] : spec.options)
    if (key == "path") value = t.path;
  return std::make_unique<TimeSeriesTask>(t, spec.str());
}

template <class O>
using TaskDeclarationOf = DeclarationOf<O, TaskPointer, const std::string&>;

using Fuzzy = FuzzyRecallOptions;
using Copy = SelectiveCopyOptions;
using Compression = CompressionOptions;
using Memorization = MemorizationOptions;
using Mqar = MqarOptions;
using Text = TextOptions;
using Argmax = ArgmaxOptions;
using Fashion = FashionMnistOptions;
using Ett = TimeSeriesOptions;

TaskDeclaration in_context_recall_task() {
  return TaskDeclarationOf<RecallOptions>{
      .name = "mad.in_context_recall",
      .meaning = "MAD in-context recall: values of repeated keys in a fresh key-value map",
      .fields = recall_fields<RecallOptions>(),
      .make = make_in_context_recall}
      .erase();
}

TaskDeclaration fuzzy_recall_task() {
  return TaskDeclarationOf<Fuzzy>{
      .name = "mad.fuzzy_recall",
      .meaning = "MAD fuzzy recall: keys and values are multi-token motifs; test keys have length K",
      .fields = {vocab<Fuzzy>(), length<Fuzzy>("tokens the model sees (left-padded)"), train_size<Fuzzy>(),
                 test_size<Fuzzy>(), Field<Fuzzy>::integer("key_len", &Fuzzy::key_len, "longest key motif K", 1),
                 Field<Fuzzy>::integer("value_len", &Fuzzy::value_len, "longest value motif", 1),
                 noise_size<Fuzzy>("token ids used as noise, just below the pad token"),
                 noise_share<Fuzzy>("share of pair slots filled with noise"), multi_query<Fuzzy>(), seed<Fuzzy>()},
      .make = make_fuzzy_recall}
      .erase();
}

TaskDeclaration noisy_recall_task() {
  return TaskDeclarationOf<NoisyRecallOptions>{
      .name = "mad.noisy_recall",
      .meaning = "MAD noisy in-context recall: recall with noise-token slots interleaved",
      .fields = recall_fields<NoisyRecallOptions>(),
      .make = make_noisy_recall}
      .erase();
}

TaskDeclaration selective_copy_task() {
  return TaskDeclarationOf<Copy>{
      .name = "mad.selective_copy",
      .meaning = "MAD selective copying: copy the data tokens scattered among blanks, in order",
      .fields = {vocab<Copy>(), length<Copy>("tokens the model sees"),
                 Field<Copy>::integer("num_tokens_to_copy", &Copy::num_tokens_to_copy, "data tokens n", 1),
                 train_size<Copy>(), test_size<Copy>(), seed<Copy>()},
      .make = make_selective_copy}
      .erase();
}

TaskDeclaration compression_task() {
  return TaskDeclarationOf<Compression>{
      .name = "mad.compression",
      .meaning = "MAD compression: encode the sequence into its last position and decode it back",
      .fields = {vocab<Compression>(), length<Compression>("tokens the model sees"), train_size<Compression>(),
                 test_size<Compression>(),
                 noise_size<Compression>("token ids used as noise, just below the compression token"),
                 noise_share<Compression>("chance that a data token is replaced by noise (the target stays the "
                                          "input)"),
                 seed<Compression>()},
      .make = make_compression}
      .erase();
}

TaskDeclaration memorization_task() {
  return TaskDeclarationOf<Memorization>{
      .name = "mad.memorization",
      .meaning = "MAD memorization: a fixed key-value map stored in the weights",
      .fields = {vocab<Memorization>(), length<Memorization>("tokens the model sees (even)"),
                 train_size<Memorization>(), test_size<Memorization>(),
                 noise_size<Memorization>("token ids used as noise, just below the insert token"),
                 noise_share<Memorization>("share of key/insert slots filled with two noise tokens"),
                 seed<Memorization>()},
      .make = make_memorization}
      .erase();
}

TaskDeclaration mqar_task() {
  return TaskDeclarationOf<Mqar>{
      .name = "mqar",
      .meaning = "zoology's multi-query associative recall",
      .fields = {vocab<Mqar>(), length<Mqar>("tokens the model sees (even)"),
                 Field<Mqar>::integer("num_kv_pairs", &Mqar::num_kv_pairs, "key-value pairs D per sequence", 1),
                 Field<Mqar>::real("power_a", &Mqar::power_a, "query gaps drawn with weight i^(power_a - 1)", 1e-6,
                                   10.0),
                 Field<Mqar>::flag("random_non_queries", &Mqar::random_non_queries,
                                   "fill non-query positions with random tokens"),
                 Field<Mqar>::integer("num_passes", &Mqar::num_passes, "repetitions of the key-value context", 1,
                                      1 << 20),
                 train_size<Mqar>(), test_size<Mqar>(), seed<Mqar>()},
      .make = make_mqar}
      .erase();
}

TaskDeclaration text_task() {
  return TaskDeclarationOf<Text>{
      .name = "text",
      .meaning = "next-token language modelling on a text file with a BPE vocabulary trained on its training split",
      .fields = {Field<Text>::text("path", &Text::path, "UTF-8 text file"), length<Text>("tokens per window"),
                 Field<Text>::integer("vocab_size", &Text::vocab_size, "BPE pieces, special and byte pieces included",
                                      300, 1 << 20),
                 Field<Text>::real("val_fraction", &Text::val_fraction,
                                   "share of the file (its end) held out for validation", 1e-6, 0.999999),
                 Field<Text>::text("tokenizer", &Text::tokenizer,
                                   "SentencePiece .model to use (empty: train BPE on the training split)"),
                 Field<Text>::integer("num_test", &Text::num_test, "validation windows evaluated (0 = all)", 0),
                 Field<Text>::choice("documents", &Text::documents,
                                     std::vector<std::string>{"none", "lines", "paragraphs"},
                                     "none: windows of one token stream; lines, paragraphs: documents read from "
                                     "their own start"),
                 Field<Text>::flag("pack", &Text::pack,
                                   "pack documents whole into full rows (no compute on padding; needs documents)"),
                 seed<Text>()},
      .make = make_text}
      .erase();
}

TaskDeclaration argmax_task() {
  return TaskDeclarationOf<Argmax>{
      .name = "argmax",
      .meaning = "FEM's channel-wise argmax toy: output the per-channel max of a [T,D] value matrix",
      .fields = {length<Argmax>("positions T"), Field<Argmax>::integer("dim", &Argmax::dim, "channels D", 1),
                 Field<Argmax>::real("margin", &Argmax::margin, "winner margin", 1e-9),
                 Field<Argmax>::real("noise", &Argmax::noise, "noise std", 0.0), train_size<Argmax>(),
                 test_size<Argmax>(), seed<Argmax>()},
      .make = make_argmax}
      .erase();
}

TaskDeclaration fashion_mnist_task() {
  return TaskDeclarationOf<Fashion>{
      .name = "fashion_mnist",
      .meaning = "Fashion-MNIST image classification: 28x28 images as sequences of patches, 10 classes (Debian's "
                 "dataset-fashion-mnist)",
      .fields = {Field<Fashion>::text("path", &Fashion::path, "folder of the four IDX files (.gz or not)"),
                 Field<Fashion>::integer("patch", &Fashion::patch,
                                         "patch side: an image is (28/patch)^2 tokens of patch^2 pixels", 1, 28),
                 train_size<Fashion>(),
                 Field<Fashion>::integer("num_val", &Fashion::num_val, "training images held out for validation",
                                         1, 59999),
                 Field<Fashion>::choice("heldout", &Fashion::heldout, std::vector<std::string>{"val", "test"},
                                        "the held-out set evaluations use: the validation split or the 10,000 "
                                        "test images"),
                 seed<Fashion>()},
      .make = make_fashion_mnist}
      .erase();
}

TaskDeclaration ett_task() {
  return TaskDeclarationOf<Ett>{
      .name = "ett",
      .meaning = "multivariate time-series forecasting on a CSV table (ETT), Informer's split and z-scoring",
      .fields = {Field<Ett>::text("path", &Ett::path, "CSV file with a header (a 'date' column is skipped)"),
                 Field<Ett>::integer("input_len", &Ett::input_len, "rows the model reads", 1, 1 << 20),
                 Field<Ett>::integer("horizon", &Ett::horizon, "rows it forecasts", 1, 1 << 20),
                 Field<Ett>::integer("train_rows", &Ett::train_rows, "rows of the training split (ETTh: 12 months)",
                                     1),
                 Field<Ett>::integer("val_rows", &Ett::val_rows, "rows of the validation split, after the training "
                                     "rows", 0),
                 Field<Ett>::integer("test_rows", &Ett::test_rows, "rows of the test split, after the validation "
                                     "rows", 0),
                 Field<Ett>::choice("split", &Ett::split, std::vector<std::string>{"test", "val"},
                                    "the evaluation set"),
                 Field<Ett>::integer("stride", &Ett::stride, "step between training windows", 1), seed<Ett>()},
      .make = make_ett}
      .erase();
}

}  // namespace

// The list of tasks, in `seqmix list` order: one line per task.
const std::vector<TaskDeclaration>& task_declarations() {
  static const std::vector<TaskDeclaration> declarations = {
      in_context_recall_task(),
      fuzzy_recall_task(),
      noisy_recall_task(),
      selective_copy_task(),
      compression_task(),
      memorization_task(),
      mqar_task(),
      text_task(),
      argmax_task(),
      fashion_mnist_task(),
      ett_task(),
  };
  return declarations;
}

const std::vector<ComponentInfo>& task_infos() {
  static const std::vector<ComponentInfo> infos = component_infos(task_declarations());
  return infos;
}

TaskSpec::TaskSpec(const std::string& text) : ParsedSpec(parse_spec(task_declarations(), "task", text)) {}

std::unique_ptr<Task> build_task(const TaskSpec& spec) {
  return built_within_limits("task " + spec.source, [&] { return spec.build(spec.text); });
}

}  // namespace seqmix

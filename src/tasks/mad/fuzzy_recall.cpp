#include "seqmix/tasks/mad/fuzzy_recall.h"

#include <map>

#include "seqmix/io/error.h"

namespace seqmix {
namespace {

using Motif = std::vector<int64_t>;

// An ordered tuple of `length` distinct tokens from [first, first + count).
Motif draw_motif(int64_t first, int64_t count, int64_t length, DataRng& rng) {
  std::vector<int64_t> pool(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) pool[static_cast<size_t>(i)] = first + i;
  Motif m;
  for (int64_t i = 0; i < length; ++i) {  // partial Fisher-Yates
    const int64_t j = i + rng.below(count - i);
    std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(j)]);
    m.push_back(pool[static_cast<size_t>(i)]);
  }
  return m;
}

// Multi-query: pad V-1; single-query: pad V-2 and copy prefix V-1 (specs/mad.md 2.3).
int64_t special_tokens(const FuzzyRecallOptions& o) { return o.multi_query ? 1 : 2; }

}  // namespace

void validate(const FuzzyRecallOptions& o) {
  const int64_t symbols = o.vocab_size - special_tokens(o) - o.noise_vocab_size;
  if (o.noise_vocab_size < 0) throw Error("fuzzy recall: noise_vocab_size must be >= 0");
  if (o.key_len < 1 || o.value_len < 1) throw Error("fuzzy recall: key_len and value_len must be >= 1");
  if (symbols / 2 < o.key_len || symbols - symbols / 2 < o.value_len)
    throw Error("fuzzy recall: vocab_size=" + std::to_string(o.vocab_size) +
                " less its special tokens and noise_vocab_size=" + std::to_string(o.noise_vocab_size) +
                " is too small for motifs of key_len=" + std::to_string(o.key_len) + " distinct keys and value_len=" +
                std::to_string(o.value_len) + " distinct values");
  if (o.seq_len < 4 * (o.key_len + o.value_len))
    throw Error("fuzzy recall: seq_len must be at least 4 * (key_len + value_len)");
  if (!(o.frac_noise >= 0.0 && o.frac_noise < 1.0)) throw Error("fuzzy recall: frac_noise must be in [0, 1)");
  if (o.frac_noise > 0 && o.noise_vocab_size == 0) throw Error("fuzzy recall: frac_noise > 0 needs noise_vocab_size > 0");
  if (o.num_train < 1 || o.num_test < 1) throw Error("fuzzy recall: num_train and num_test must be >= 1");
}

TokenExample fuzzy_recall_example(const FuzzyRecallOptions& o, bool training, DataRng& rng) {
  const int64_t pad = o.multi_query ? o.vocab_size - 1 : o.vocab_size - 2;
  const int64_t copy_prefix = o.vocab_size - 1;  // single-query only
  const int64_t symbols = o.vocab_size - special_tokens(o) - o.noise_vocab_size;
  const int64_t num_keys = symbols / 2, num_values = symbols - num_keys;
  const int64_t noise_first = symbols;  // noise ids sit between the values and the pad token
  const int64_t K = o.key_len, Vm = o.value_len, L = o.seq_len;
  auto key_length = [&] { return training ? 1 + rng.below(K) : K; };

  const int64_t probe_key_len = key_length(), probe_value_len = 1 + rng.below(Vm);
  const Motif probe_key = draw_motif(0, num_keys, probe_key_len, rng);
  const Motif probe_value = draw_motif(num_keys, num_values, probe_value_len, rng);
  const int64_t q = probe_key_len + probe_value_len;
  const int64_t probe_index = rng.below(L - 2 * q);

  std::vector<int64_t> tokens, labels;
  auto append = [&](const Motif& m, bool scored) {
    for (int64_t t : m) {
      tokens.push_back(t);
      labels.push_back(scored ? t : kIgnoreIndex);
    }
  };
  std::map<Motif, Motif> value_of;
  bool probe_placed = false;
  while (static_cast<int64_t>(tokens.size()) < L - q - (K + Vm)) {
    const int64_t kl = key_length(), vl = 1 + rng.below(Vm);
    if (static_cast<int64_t>(tokens.size()) >= probe_index && !probe_placed) {
      append(probe_key, false);
      append(probe_value, false);
      value_of[probe_key] = probe_value;
      probe_placed = true;
      continue;
    }
    if (o.frac_noise > 0 && rng.uniform() < o.frac_noise) {
      Motif noise;
      for (int64_t i = 0; i < kl + vl; ++i) noise.push_back(noise_first + rng.below(o.noise_vocab_size));
      append(noise, false);
      continue;
    }
    const Motif key = draw_motif(0, num_keys, kl, rng);
    const bool first = value_of.count(key) == 0;
    if (first) {
      value_of[key] = key == probe_key ? probe_value : draw_motif(num_keys, num_values, vl, rng);
      if (key == probe_key) probe_placed = true;
    }
    append(key, false);
    append(value_of[key], o.multi_query && !first);  // single-query scores only the final probe
  }
  if (!o.multi_query) append({copy_prefix}, false);
  append(probe_key, false);
  append(probe_value, true);
  // Left-pad to L+1 tokens.
  const size_t total = static_cast<size_t>(L + 1);
  if (tokens.size() > total) throw std::logic_error("fuzzy recall: sequence overflow");
  TokenExample ex;
  ex.tokens.assign(total - tokens.size(), pad);
  ex.labels.assign(total - labels.size(), kIgnoreIndex);
  ex.tokens.insert(ex.tokens.end(), tokens.begin(), tokens.end());
  ex.labels.insert(ex.labels.end(), labels.begin(), labels.end());
  return ex;
}

FuzzyRecallTask::FuzzyRecallTask(const FuzzyRecallOptions& o, std::string resolved_spec)
    : DatasetTask(o.seed), options_(o), spec_(std::move(resolved_spec)) {
  validate(o);
  DataRng rng(o.seed);
  auto make = [&](int64_t n, bool training) {
    std::vector<std::vector<int64_t>> inputs, targets;
    for (int64_t i = 0; i < n; ++i) {
      const TokenExample ex = fuzzy_recall_example(o, training, rng);
      inputs.emplace_back(ex.tokens.begin(), ex.tokens.end() - 1);
      const auto& next = training ? ex.tokens : ex.labels;
      targets.emplace_back(next.begin() + 1, next.end());
    }
    return Batch{stack_rows(inputs), stack_rows(targets)};
  };
  Batch train = make(o.num_train, true);
  Batch test = make(o.num_test, false);
  set_data(std::move(train), std::move(test));
}

}  // namespace seqmix

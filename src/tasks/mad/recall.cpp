#include "seqmix/tasks/mad/recall.h"

#include <ATen/ATen.h>

#include <map>

#include "seqmix/io/error.h"

namespace seqmix {

void validate(const RecallOptions& o) {
  const int64_t extra = o.multi_query ? 0 : 1;  // the single-query copy prefix
  const int64_t symbols = o.vocab_size - o.noise_vocab_size - extra;
  if (o.seq_len < 4 || o.seq_len % 2 != 0) throw Error("recall task: seq_len must be even and >= 4");
  if (symbols < 2)
    throw Error("recall task: vocab_size=" + std::to_string(o.vocab_size) + " less noise_vocab_size=" +
                std::to_string(o.noise_vocab_size) + (extra ? " and the copy token" : "") +
                " leaves fewer than 2 key/value tokens");
  if (o.noise_vocab_size < 0) throw Error("recall task: noise_vocab_size must be >= 0");
  if (!(o.frac_noise >= 0.0 && o.frac_noise < 1.0)) throw Error("recall task: frac_noise must be in [0, 1)");
  if (o.frac_noise > 0 && o.noise_vocab_size == 0) throw Error("recall task: frac_noise > 0 needs noise_vocab_size > 0");
  if (o.num_train < 1 || o.num_test < 1) throw Error("recall task: num_train and num_test must be >= 1");
}

TokenExample recall_example(const RecallOptions& o, DataRng& rng) {
  const int64_t copy_prefix = o.vocab_size - 1;  // single-query only
  const int64_t symbols = o.vocab_size - o.noise_vocab_size - (o.multi_query ? 0 : 1);
  const int64_t num_keys = symbols / 2, num_values = symbols - num_keys;
  const int64_t noise_base = symbols;  // noise ids follow the key/value ids
  const int64_t slots = o.seq_len / 2;
  const bool noisy = o.noise_vocab_size > 0 && o.frac_noise > 0;
  // One slot is forced to be a real pair (drawn from all slots, as MAD does).
  const int64_t forced = noisy ? rng.below(slots) : -1;

  TokenExample ex;
  std::map<int64_t, int64_t> value_of;
  std::vector<int64_t> shown;  // keys in order of first appearance
  auto push = [&ex](int64_t token, int64_t label) {
    ex.tokens.push_back(token);
    ex.labels.push_back(label);
  };
  for (int64_t slot = 0; slot + 1 < slots; ++slot) {
    if (noisy && slot != forced && rng.uniform() < o.frac_noise) {
      push(noise_base + rng.below(o.noise_vocab_size), kIgnoreIndex);
      push(noise_base + rng.below(o.noise_vocab_size), kIgnoreIndex);
      continue;
    }
    const int64_t key = rng.below(num_keys);
    const bool first = value_of.count(key) == 0;
    if (first) {
      value_of[key] = num_keys + rng.below(num_values);
      shown.push_back(key);
    }
    push(key, kIgnoreIndex);
    push(value_of[key], (o.multi_query && !first) ? value_of[key] : kIgnoreIndex);
  }
  if (!o.multi_query) push(copy_prefix, kIgnoreIndex);
  int64_t key, value;
  if (!shown.empty()) {
    key = shown[static_cast<size_t>(rng.below(static_cast<int64_t>(shown.size())))];
    value = value_of[key];
  } else {  // every context slot was noise: the query cannot be answered from context
    key = rng.below(num_keys);
    value = num_keys + rng.below(num_values);
  }
  push(key, kIgnoreIndex);
  push(value, value);
  return ex;
}

RecallTask::RecallTask(std::string name, const RecallOptions& o, std::string resolved_spec)
    : DatasetTask(o.seed), name_(std::move(name)), spec_(std::move(resolved_spec)), options_(o) {
  validate(o);
  DataRng rng(o.seed);
  auto make = [&](int64_t n, bool training) {
    std::vector<std::vector<int64_t>> inputs, targets;
    for (int64_t i = 0; i < n; ++i) {
      const TokenExample ex = recall_example(o, rng);
      inputs.emplace_back(ex.tokens.begin(), ex.tokens.end() - 1);
      // Training: full next-token targets; test: only the scored positions.
      const auto& next = training ? ex.tokens : ex.labels;
      targets.emplace_back(next.begin() + 1, next.end());
    }
    return Batch{stack_rows(inputs), stack_rows(targets)};
  };
  Batch train = make(o.num_train, true);  // all training examples first, then test, one stream
  Batch test = make(o.num_test, false);
  set_data(std::move(train), std::move(test));
}

int64_t RecallTask::seq_len() const { return options_.multi_query ? options_.seq_len - 1 : options_.seq_len; }

}  // namespace seqmix

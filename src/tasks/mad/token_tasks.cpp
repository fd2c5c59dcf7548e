#include "seqmix/tasks/mad/token_tasks.h"

#include <numeric>

#include "seqmix/io/error.h"

namespace seqmix {

TokenExample selective_copy_example(const SelectiveCopyOptions& o, DataRng& rng) {
  const int64_t copy_token = o.vocab_size - 1, blank = o.vocab_size - 2, n = o.num_tokens_to_copy;
  const int64_t blanks = o.seq_len - 2 * n - 1;
  std::vector<int64_t> data(static_cast<size_t>(n));
  for (auto& d : data) d = rng.below(o.vocab_size - 2);
  // Each blank lands in one of the n gaps before a data token; no blank follows the last data token.
  std::vector<int64_t> gap(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < blanks; ++b) gap[static_cast<size_t>(rng.below(n))] += 1;
  TokenExample ex;
  for (int64_t i = 0; i < n; ++i) {
    ex.tokens.insert(ex.tokens.end(), static_cast<size_t>(gap[static_cast<size_t>(i)]), blank);
    ex.tokens.push_back(data[static_cast<size_t>(i)]);
  }
  ex.tokens.push_back(copy_token);
  ex.tokens.insert(ex.tokens.end(), static_cast<size_t>(n), blank);
  ex.labels.assign(static_cast<size_t>(o.seq_len - n), kIgnoreIndex);
  ex.labels.insert(ex.labels.end(), data.begin(), data.end());
  return ex;
}

namespace {

// Shared checks of MAD's noise option; `symbols` = data ids left once the special and noise ids are taken.
void validate_noise(const char* task, int64_t symbols, int64_t minimum_symbols, int64_t noise_vocab_size,
                    double frac_noise) {
  const std::string name(task);
  if (noise_vocab_size < 0) throw Error(name + ": noise_vocab_size must be >= 0");
  if (symbols < minimum_symbols)
    throw Error(name + ": vocab_size leaves fewer than " + std::to_string(minimum_symbols) +
                " data tokens once the special tokens and noise_vocab_size=" + std::to_string(noise_vocab_size) +
                " noise tokens are taken");
  if (!(frac_noise >= 0.0 && frac_noise < 1.0)) throw Error(name + ": frac_noise must be in [0, 1)");
  if (frac_noise > 0 && noise_vocab_size == 0) throw Error(name + ": frac_noise > 0 needs noise_vocab_size > 0");
}

int64_t compression_symbols(const CompressionOptions& o) { return o.vocab_size - 1 - o.noise_vocab_size; }
int64_t memorization_symbols(const MemorizationOptions& o) { return o.vocab_size - 1 - o.noise_vocab_size; }

}  // namespace

void validate(const CompressionOptions& o) {
  validate_noise("compression", compression_symbols(o), 1, o.noise_vocab_size, o.frac_noise);
  if (o.num_train < 1 || o.num_test < 1) throw Error("compression: num_train and num_test must be >= 1");
}

void validate(const MemorizationOptions& o) {
  validate_noise("memorization", memorization_symbols(o), 2, o.noise_vocab_size, o.frac_noise);
  if (o.seq_len % 2 != 0) throw Error("memorization: seq_len must be even");
  if (o.num_train < 1 || o.num_test < 1) throw Error("memorization: num_train and num_test must be >= 1");
}

TokenExample compression_example(const CompressionOptions& o, DataRng& rng) {
  const int64_t symbols = compression_symbols(o);
  TokenExample ex;
  for (int64_t i = 0; i + 1 < o.seq_len; ++i) {
    const bool noise = o.frac_noise > 0 && rng.uniform() < o.frac_noise;
    ex.tokens.push_back(noise ? symbols + rng.below(o.noise_vocab_size) : rng.below(symbols));
  }
  ex.tokens.push_back(o.vocab_size - 1);  // the compression token
  ex.labels = ex.tokens;                  // the target is the input itself, noise included (MAD's quirk)
  return ex;
}

std::vector<int64_t> memorization_map(const MemorizationOptions& o) {
  const int64_t symbols = memorization_symbols(o), num_keys = symbols / 2;
  std::vector<int64_t> keys(static_cast<size_t>(num_keys)), values(static_cast<size_t>(symbols - num_keys));
  std::iota(keys.begin(), keys.end(), 0);
  std::iota(values.begin(), values.end(), num_keys);
  DataRng rng(derive_seed(o.seed, 0x4d454d4fULL));
  rng.shuffle(keys);
  rng.shuffle(values);
  std::vector<int64_t> value_of(static_cast<size_t>(num_keys));
  for (size_t i = 0; i < keys.size(); ++i) value_of[static_cast<size_t>(keys[i])] = values[i];
  return value_of;
}

TokenExample memorization_example(const MemorizationOptions& o, const std::vector<int64_t>& value_of, DataRng& rng) {
  const int64_t insert = o.vocab_size - 1, noise_first = memorization_symbols(o);
  const int64_t slots = o.seq_len / 2;
  const bool noisy = o.frac_noise > 0;
  const int64_t forced = noisy ? rng.below(slots) : -1;  // one slot always holds a fact, as in MAD
  TokenExample ex;
  for (int64_t s = 0; s < slots; ++s) {
    if (noisy && s != forced && rng.uniform() < o.frac_noise) {
      for (int i = 0; i < 2; ++i) {
        ex.tokens.push_back(noise_first + rng.below(o.noise_vocab_size));
        ex.labels.push_back(kIgnoreIndex);
      }
      continue;
    }
    const int64_t key = rng.below(static_cast<int64_t>(value_of.size()));
    ex.tokens.push_back(key);
    ex.labels.push_back(kIgnoreIndex);
    ex.tokens.push_back(insert);
    ex.labels.push_back(value_of[static_cast<size_t>(key)]);
  }
  return ex;
}

AlignedTokenTask::AlignedTokenTask(std::string name, std::string resolved_spec, int64_t vocab_size, int64_t seq_len,
                                   uint64_t seed, int64_t num_train, int64_t num_test,
                                   const std::function<TokenExample(DataRng&)>& generate, std::string default_model)
    : DatasetTask(seed),
      name_(std::move(name)),
      spec_(std::move(resolved_spec)),
      default_model_(std::move(default_model)),
      vocab_size_(vocab_size),
      seq_len_(seq_len) {
  if (num_train < 1 || num_test < 1) throw Error("task " + name_ + ": num_train and num_test must be >= 1");
  DataRng rng(seed);
  auto make = [&](int64_t n) {
    std::vector<std::vector<int64_t>> inputs, targets;
    for (int64_t i = 0; i < n; ++i) {
      TokenExample ex = generate(rng);
      inputs.push_back(std::move(ex.tokens));
      targets.push_back(std::move(ex.labels));
    }
    return Batch{stack_rows(inputs), stack_rows(targets)};
  };
  Batch train = make(num_train);
  Batch test = make(num_test);
  set_data(std::move(train), std::move(test));
}

}  // namespace seqmix

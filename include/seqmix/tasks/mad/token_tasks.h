#pragma once
// MAD's selective copying, compression and memorization (specs/mad.md 2.4-2.6): aligned targets, the
// same masking for training and test.
#include <functional>

#include "seqmix/tasks/dataset_task.h"
#include "seqmix/tasks/data_rng.h"
#include "seqmix/tasks/mad/recall.h"

namespace seqmix {

struct SelectiveCopyOptions {
  int64_t vocab_size = 16;
  int64_t seq_len = 256;
  int64_t num_tokens_to_copy = 16;
  int64_t num_train = 12800, num_test = 1280;
  uint64_t seed = 12345;
};

// MAD's noise option for compression and memorization (unused by its benchmark): the noise ids sit just
// below the special token; frac_noise is the chance that a data token (compression) or a key/insert slot
// (memorization) is replaced by noise.
struct CompressionOptions {
  int64_t vocab_size = 16;
  int64_t seq_len = 32;
  int64_t num_train = 12800, num_test = 1280;
  int64_t noise_vocab_size = 0;
  double frac_noise = 0.0;  // as in MAD, the target stays the (noisy) input itself
  uint64_t seed = 12345;
};

struct MemorizationOptions {
  int64_t vocab_size = 256;
  int64_t seq_len = 32;
  int64_t num_train = 256, num_test = 1280;
  int64_t noise_vocab_size = 0;
  double frac_noise = 0.0;  // noise slots are two noise tokens, both unscored
  uint64_t seed = 12345;
};

// Check the options and throw Error naming the first violated requirement.
void validate(const CompressionOptions& options);
void validate(const MemorizationOptions& options);

// Examples as (tokens, aligned labels). Memorization also takes the fixed key -> value map.
TokenExample selective_copy_example(const SelectiveCopyOptions& options, DataRng& rng);
TokenExample compression_example(const CompressionOptions& options, DataRng& rng);
TokenExample memorization_example(const MemorizationOptions& options, const std::vector<int64_t>& value_of_key,
                                  DataRng& rng);
// The fixed random bijection from the keys onto values (seeded), indexed by key token.
std::vector<int64_t> memorization_map(const MemorizationOptions& options);

// A MAD task whose examples are (tokens, aligned labels) from a generator.
class AlignedTokenTask : public DatasetTask {
 public:
  AlignedTokenTask(std::string name, std::string resolved_spec, int64_t vocab_size, int64_t seq_len, uint64_t seed,
                   int64_t num_train, int64_t num_test, const std::function<TokenExample(DataRng&)>& generate,
                   std::string default_model = "lm");
  std::string name() const override { return name_; }
  std::string resolved_spec() const override { return spec_; }
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t seq_len() const override { return seq_len_; }
  std::string default_model() const override { return default_model_; }

 private:
  std::string name_, spec_, default_model_;
  int64_t vocab_size_, seq_len_;
};

}  // namespace seqmix

// Fuzzes checkpoint loading (what --resume, eval and generate read): the JSON record (first byte 0 mod 3),
// the weights file (1 mod 3) or the optimizer file (2 mod 3), a file with the record's size and checksum made to
// match, so the input reaches the checks of tensors against the model. A checkpoint of a small model and its
// optimizer is the seed. Any input loads or gives a one-line Error.
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "fuzz_support.h"
#include "seqmix/io/atomic_file.h"
#include "seqmix/io/checksum.h"
#include "seqmix/train/checkpoint.h"

using namespace seqmix;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  fs::path run_dir, record_path, weights_path, optimizer_path;
  std::string record_bytes, weights_bytes, optimizer_bytes;  // the seed checkpoint's three files
  torch::nn::Sequential model{torch::nn::Linear(3, 4), torch::nn::LayerNorm(torch::nn::LayerNormOptions({4}))};
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

Fixture& fixture() {
  static Fixture* f = [] {
    auto* f = new Fixture;
    f->run_dir = fs::temp_directory_path() / ("seqmix-fuzz-checkpoint-" + std::to_string(::getpid()));
    fs::remove_all(f->run_dir);
    f->optimizer = std::make_unique<torch::optim::AdamW>(f->model->parameters(), torch::optim::AdamWOptions(1e-3));
    f->model->forward(torch::randn({2, 3})).sum().backward();
    f->optimizer->step();
    TrainerState state;
    state.step = 7;
    state.final_metrics = {{"loss", 1.5}};
    state.best_metrics = {{"loss", 1.25}};
    state.best_step = 5;
    save_checkpoint(f->run_dir.string(), *f->model, *f->optimizer, state, 1);
    const fs::path dir = f->run_dir / "checkpoints";
    f->record_path = dir / "step-00000007.json";
    f->weights_path = dir / "step-00000007.safetensors";
    f->optimizer_path = dir / "step-00000007.optimizer.safetensors";
    f->record_bytes = read_file(f->record_path.string());
    f->weights_bytes = read_file(f->weights_path.string());
    f->optimizer_bytes = read_file(f->optimizer_path.string());
    // SEQMIX_FUZZ_WRITE_SEEDS=DIR writes the three seeds; copy them into fuzz/corpus/fuzz_checkpoint when the
    // checkpoint format changes.
    if (const char* dir = std::getenv("SEQMIX_FUZZ_WRITE_SEEDS")) {
      std::ofstream(fs::path(dir) / "record.seed", std::ios::binary) << '\0' << f->record_bytes;
      std::ofstream(fs::path(dir) / "weights.seed", std::ios::binary) << '\1' << f->weights_bytes;
      std::ofstream(fs::path(dir) / "optimizer.seed", std::ios::binary) << '\2' << f->optimizer_bytes;
    }
    return f;
  }();
  return *f;
}

void put(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Fixture& f = fixture();
  const std::string input = fuzz::as_string(data + 1, size - 1);
  const int target = data[0] % 3;
  put(f.weights_path, f.weights_bytes);
  put(f.optimizer_path, f.optimizer_bytes);
  if (target == 0) {
    put(f.record_path, input);
  } else {
    nlohmann::json record = nlohmann::json::parse(f.record_bytes);
    const char* part = target == 1 ? "weights" : "optimizer";
    record[part]["bytes"] = input.size();
    record[part]["sha256"] = sha256_hex(input);
    put(f.record_path, record.dump(2));
    put(target == 1 ? f.weights_path : f.optimizer_path, input);
  }
  TrainerState state;
  try {
    fuzz::require(load_checkpoint(f.run_dir.string(), *f.model, f.optimizer.get(), state), "the checkpoint was not found");
  } catch (const Error& e) {
    fuzz::require_one_line(e);
  }
  return 0;
}

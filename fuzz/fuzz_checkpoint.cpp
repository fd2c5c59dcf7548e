// Fuzzes checkpoint loading (what --resume, eval and generate read): the JSON record (first byte even)
// or the tensors file (first byte odd, with the record's size and checksum made to match, so the input
// reaches the checks of tensors against the model). A checkpoint of a small model and its optimizer is
// the seed. Any input loads or gives a one-line Error.
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "fuzz_support.h"
#include "seqmix/io/atomic_file.h"
#include "seqmix/train/checkpoint.h"

using namespace seqmix;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  fs::path run_dir, record_path, tensors_path;
  std::string record, tensors;
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
    for (const auto& e : fs::directory_iterator(f->run_dir / "checkpoints")) {
      if (e.path().extension() == ".json") f->record_path = e.path();
      if (e.path().extension() == ".safetensors") f->tensors_path = e.path();
    }
    f->record = read_file(f->record_path.string());
    f->tensors = read_file(f->tensors_path.string());
    // SEQMIX_FUZZ_WRITE_SEEDS=DIR writes the two seeds (scripts/fuzz.sh keeps them in fuzz/corpus).
    if (const char* dir = std::getenv("SEQMIX_FUZZ_WRITE_SEEDS")) {
      std::ofstream(fs::path(dir) / "record.seed", std::ios::binary) << '\0' << f->record;
      std::ofstream(fs::path(dir) / "tensors.seed", std::ios::binary) << '\1' << f->tensors;
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
  if (data[0] % 2 == 0) {
    put(f.record_path, input);
    put(f.tensors_path, f.tensors);
  } else {
    nlohmann::json record = nlohmann::json::parse(f.record);
    record["tensors_bytes"] = input.size();
    record["tensors_fnv1a64"] = std::to_string(fnv1a64(input));
    put(f.record_path, record.dump(2));
    put(f.tensors_path, input);
  }
  TrainerState state;
  try {
    fuzz::require(load_checkpoint(f.run_dir.string(), *f.model, f.optimizer.get(), state), "the checkpoint was not found");
  } catch (const Error& e) {
    fuzz::require_one_line(e);
  }
  return 0;
}

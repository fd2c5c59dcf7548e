#include "seqmix/train/checkpoint.h"

#include <torch/torch.h>

#include <charconv>
#include <functional>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/checksum.h"
#include "seqmix/io/error.h"
#include "seqmix/io/safetensors.h"

namespace seqmix {
namespace fs = std::filesystem;
namespace {

// A checkpoint's record names its format. Version 2 (written): the weights in step-<N>.safetensors under the
// model's own parameter and buffer names with metadata format=pt (what safetensors' PyTorch tools write and
// expect), AdamW's state in step-<N>.optimizer.safetensors, each file with its size and SHA-256 in the record.
// Version 1 (read only): one step-<N>.safetensors holding model.<name> and optimizer.<name>.*, metadata
// format=seqmix-checkpoint-1, checked with fnv1a64_seqmix.
constexpr const char* kRecordFormat = "seqmix-checkpoint";
constexpr int64_t kVersion = 2;
constexpr const char* kFormat1 = "seqmix-checkpoint-1";
constexpr const char* kWeightsFormat = "pt";

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string from_hex(const std::string& hex, const std::string& where) {
  if (hex.size() % 2 != 0) throw Error(where + ": malformed hex string");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    auto nibble = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      throw Error(where + ": malformed hex string");
    };
    out[i] = static_cast<char>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  }
  return out;
}

// The optimizer's per-parameter state is keyed by the parameter's TensorImpl.
void* optimizer_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

nlohmann::json metrics_json(const std::map<std::string, double>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

std::map<std::string, double> metrics_from(const nlohmann::json& j) {
  std::map<std::string, double> m;
  for (auto it = j.begin(); it != j.end(); ++it) m[it.key()] = it->get<double>();
  return m;
}

// The file's tensor `name`, which must have like's shape and dtype.
const torch::Tensor& expect_tensor(const SafetensorsFile& file, const std::string& path, const std::string& name,
                                   const torch::Tensor& like) {
  if (!file.contains(name)) throw Error("checkpoint " + path + " does not fit the model: no tensor '" + name + "'");
  const auto& t = file.at(name);
  if (t.sizes() != like.sizes() || t.scalar_type() != like.scalar_type())
    throw Error("checkpoint " + path + " does not fit the model: tensor '" + name + "' has shape " + c10::str(t.sizes()) +
                " " + c10::toString(t.scalar_type()) + ", the model " + c10::str(like.sizes()) + " " +
                c10::toString(like.scalar_type()));
  return t;
}

// The model's parameters and buffers under their names with a prefix ("" in a version-2 weights file, "model."
// in a version-1 tensors file).
std::vector<std::pair<std::string, torch::Tensor>> model_tensors(torch::nn::Module& model, const std::string& prefix) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : model.named_parameters()) tensors.emplace_back(prefix + p.key(), p.value());
  for (const auto& b : model.named_buffers()) tensors.emplace_back(prefix + b.key(), b.value());
  return tensors;
}

// Every parameter and buffer of the model, with its shape and dtype.
void check_model_fits(const SafetensorsFile& file, const std::string& path, const std::string& prefix,
                      torch::nn::Module& model) {
  for (const auto& [name, tensor] : model_tensors(model, prefix)) expect_tensor(file, path, name, tensor);
}

void copy_model(const SafetensorsFile& file, const std::string& prefix, torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : model_tensors(model, prefix)) tensor.copy_(file.at(name));
}

// AdamW's state of every parameter that has one: <name>.exp_avg, <name>.exp_avg_sq and <name>.step (int64).
std::vector<std::pair<std::string, torch::Tensor>> optimizer_tensors(torch::nn::Module& model,
                                                                     torch::optim::AdamW& optimizer) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  auto& opt_state = optimizer.state();
  for (const auto& p : model.named_parameters()) {
    auto it = opt_state.find(optimizer_key(p.value()));
    if (it == opt_state.end()) continue;
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    tensors.emplace_back(p.key() + ".exp_avg", s.exp_avg());
    tensors.emplace_back(p.key() + ".exp_avg_sq", s.exp_avg_sq());
    tensors.emplace_back(p.key() + ".step", torch::tensor(s.step(), torch::kLong));
  }
  return tensors;
}

// Writes one file of a checkpoint atomically; its entry in the record (name, size, SHA-256).
nlohmann::json write_part(const fs::path& dir, const std::string& file, const std::string& bytes) {
  write_file_atomically((dir / file).string(), bytes);
  return {{"file", file}, {"bytes", bytes.size()}, {"sha256", sha256_hex(bytes)}};
}

// A checkpoint read and checked against its record, before anything is changed.
struct StoredCheckpoint {
  TrainerState state;
  std::string record_path, rng_hex;
  SafetensorsFile weights, optimizer;                // the same file in version 1
  std::string weights_path, optimizer_path;
  std::string weights_prefix, optimizer_prefix;      // "" and "" (version 2); "model." and "optimizer." (version 1)
};

// The file a record commits: the name it must have, checked against the size and checksum recorded.
std::string read_committed_file(const fs::path& dir, const std::string& where, const std::string& name,
                                const std::string& own_name, uint64_t bytes_recorded,
                                const std::function<bool(const std::string&)>& checksum_matches) {
  if (name != own_name) throw Error(where + " names a file other than its own (" + own_name + ")");
  const std::string path = (dir / name).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(where + ": its file " + path + " is missing");
  std::string bytes = read_file(path);
  if (bytes.size() != bytes_recorded || !checksum_matches(bytes))
    throw Error("checkpoint file " + path + " is truncated or corrupt (size or checksum mismatch)");
  return bytes;
}

// with_optimizer = false reads the record and the weights only (eval, generate, --init-from): the optimizer file is
// neither needed nor checked.
StoredCheckpoint read_stored_checkpoint(const std::string& run_dir, int64_t step, bool with_optimizer) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  StoredCheckpoint c;
  c.record_path = (dir / (step_name(step) + ".json")).string();
  const std::string where = "checkpoint " + c.record_path;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(c.record_path));
  } catch (const nlohmann::json::exception&) {
    throw Error(where + " is not valid JSON (corrupt or truncated)");
  }
  TrainerState& loaded = c.state;
  std::string weights_bytes, optimizer_bytes;
  bool version1 = false;  // one file holds the weights and the optimizer state
  try {
    const std::string format = j.at("format").get<std::string>();
    if (format == kFormat1) {
      weights_bytes = read_committed_file(dir, where, j.at("tensors").get<std::string>(), step_name(step) + ".safetensors",
                                          j.at("tensors_bytes").get<uint64_t>(), [&](const std::string& bytes) {
                                            return std::to_string(fnv1a64_seqmix(bytes)) ==
                                                   j.at("tensors_fnv1a64").get<std::string>();
                                          });
      c.weights_prefix = "model.";
      c.optimizer_prefix = "optimizer.";
      version1 = true;
    } else if (format == kRecordFormat) {
      const int64_t version = j.at("version").get<int64_t>();
      if (version != kVersion)
        throw Error(where + " has checkpoint format version " + std::to_string(version) +
                    (version > kVersion ? ", from a newer seqmix" : "") + "; this seqmix reads versions 1 and 2");
      auto part = [&](const char* key, const std::string& own_name) {
        const auto& p = j.at(key);
        return read_committed_file(dir, where, p.at("file").get<std::string>(), own_name, p.at("bytes").get<uint64_t>(),
                                   [&](const std::string& bytes) { return sha256_hex(bytes) == p.at("sha256").get<std::string>(); });
      };
      weights_bytes = part("weights", step_name(step) + ".safetensors");
      if (with_optimizer) optimizer_bytes = part("optimizer", step_name(step) + ".optimizer.safetensors");
    } else {
      throw Error(where + " has an unknown format '" + format.substr(0, 40) + "'");
    }
    loaded.step = j.at("step").get<int64_t>();
    c.rng_hex = j.at("rng").at("torch_cpu").get<std::string>();
    loaded.final_metrics = metrics_from(j.at("final"));
    loaded.best_metrics = metrics_from(j.at("best"));
    loaded.best_step = j.at("best_step").get<int64_t>();
    loaded.stopped_early = j.at("stopped_early").get<bool>();
    loaded.skipped_nonfinite = j.value("skipped_nonfinite", int64_t{0});  // absent before it was recorded
    if (j.contains("interval")) {  // absent before it was recorded: the first line after a resume averages less
      const auto& in = j["interval"];
      loaded.interval_steps = in.value("steps", int64_t{0});
      loaded.interval_loss = in.value("loss", 0.0);
      loaded.interval_aux = in.value("aux", 0.0);
    }
    loaded.wall_seconds = j.at("wall_seconds").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + " is missing a field or has a wrong type (" + std::string(e.what()) + ")");
  }
  if (loaded.step != step) throw Error(where + " records step " + std::to_string(loaded.step) + ", not its own");
  c.weights_path = (dir / (step_name(step) + ".safetensors")).string();
  c.weights = parse_safetensors(weights_bytes, c.weights_path);
  if (version1) {
    c.optimizer = c.weights;
    c.optimizer_path = c.weights_path;
  } else if (with_optimizer) {
    c.optimizer_path = (dir / (step_name(step) + ".optimizer.safetensors")).string();
    c.optimizer = parse_safetensors(optimizer_bytes, c.optimizer_path);
  }
  return c;
}

// The step to load: `step`, or the latest when step < 0; std::nullopt when the run has no checkpoint.
std::optional<int64_t> chosen_step(const std::string& run_dir, int64_t step) {
  const auto steps = list_checkpoints(run_dir);
  if (steps.empty()) return std::nullopt;
  if (step < 0) return steps.back();
  if (std::find(steps.begin(), steps.end(), step) == steps.end())
    throw Error("run " + run_dir + " has no checkpoint at step " + std::to_string(step));
  return step;
}

}  // namespace

void save_model_weights(const std::string& path, torch::nn::Module& model) {
  write_file_atomically(path, serialize_safetensors(model_tensors(model, ""), {{"format", kWeightsFormat}}));
}

void load_model_weights(const std::string& path, torch::nn::Module& model) {
  const SafetensorsFile file = read_safetensors(path);
  const auto format = file.metadata.find("format");
  const bool pt = format != file.metadata.end() && format->second == kWeightsFormat;
  const bool format1 = format != file.metadata.end() && format->second == kFormat1;
  if (!pt && !format1)
    throw Error(path + " is not a weights file seqmix reads: its metadata has no format=pt (from Python: "
                "safetensors.torch.save_file(model.state_dict(), path, metadata={'format': 'pt'}))");
  const std::string prefix = format1 ? "model." : "";
  check_model_fits(file, path, prefix, model);
  copy_model(file, prefix, model);
}

std::vector<int64_t> list_checkpoints(const std::string& run_dir) {
  std::vector<int64_t> steps;
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(dir)) return steps;
  static const std::regex pattern("step-([0-9]{8,})\\.json");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern)) continue;
    int64_t step = 0;
    const std::string digits = m[1].str();
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (error != std::errc() || end != digits.data() + digits.size())
      throw Error("checkpoint " + (dir / name).string() + ": its step number does not fit in 64 bits; move the file "
                  "out of the run folder");
    steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void save_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW& optimizer,
                     const TrainerState& state, int64_t keep_last, const std::string& model_record) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  fs::create_directories(dir);
  const std::string name = step_name(state.step);
  nlohmann::json j;
  j["format"] = kRecordFormat;
  j["version"] = kVersion;
  j["step"] = state.step;
  j["data_cursor"] = state.step;
  j["weights"] = write_part(dir, name + ".safetensors",
                            serialize_safetensors(model_tensors(model, ""), {{"format", kWeightsFormat}}));
  j["optimizer"] = write_part(dir, name + ".optimizer.safetensors",
                              serialize_safetensors(optimizer_tensors(model, optimizer),
                                                    {{"format", kWeightsFormat}, {"optimizer", "AdamW"}}));
  auto rng = at::detail::getDefaultCPUGenerator().get_state();
  j["rng"]["torch_cpu"] = to_hex(std::string(static_cast<const char*>(rng.data_ptr()), rng.numel()));
  j["final"] = metrics_json(state.final_metrics);
  j["best"] = metrics_json(state.best_metrics);
  j["best_step"] = state.best_step;
  j["stopped_early"] = state.stopped_early;
  j["skipped_nonfinite"] = state.skipped_nonfinite;
  j["interval"] = {{"steps", state.interval_steps}, {"loss", state.interval_loss}, {"aux", state.interval_aux}};
  if (!model_record.empty()) j["model"] = nlohmann::json::parse(model_record);
  j["wall_seconds"] = state.wall_seconds;
  write_file_atomically((dir / (name + ".json")).string(), j.dump(2) + "\n");  // the commit

  // Keep the newest keep_last: remove the record first, so a half-removed checkpoint is never listed.
  const auto steps = list_checkpoints(run_dir);
  for (size_t i = 0; keep_last > 0 && i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    const std::string old = step_name(steps[i]);
    fs::remove(dir / (old + ".json"));
    fs::remove(dir / (old + ".safetensors"));
    fs::remove(dir / (old + ".optimizer.safetensors"));
  }
}

bool load_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW* optimizer,
                     TrainerState& state, int64_t step) {
  const auto chosen = chosen_step(run_dir, step);
  if (!chosen) return false;
  const StoredCheckpoint c = read_stored_checkpoint(run_dir, *chosen, optimizer != nullptr);

  // Check everything before changing anything.
  check_model_fits(c.weights, c.weights_path, c.weights_prefix, model);
  // A parameter's optimizer state is complete (both moments and a one-element step count) or absent.
  if (optimizer) {
    for (const auto& p : model.named_parameters()) {
      const std::string base = c.optimizer_prefix + p.key();
      if (!c.optimizer.contains(base + ".exp_avg")) continue;
      expect_tensor(c.optimizer, c.optimizer_path, base + ".exp_avg", p.value());
      expect_tensor(c.optimizer, c.optimizer_path, base + ".exp_avg_sq", p.value());
      if (!c.optimizer.contains(base + ".step") || c.optimizer.at(base + ".step").numel() != 1 ||
          c.optimizer.at(base + ".step").scalar_type() != torch::kLong)
        throw Error("checkpoint " + c.optimizer_path + " does not fit the model: '" + base +
                    ".step' is missing or not one int64");
    }
  }
  const std::string rng_bytes = from_hex(c.rng_hex, "checkpoint " + c.record_path);
  auto rng = torch::empty({static_cast<int64_t>(rng_bytes.size())}, torch::kByte);
  std::memcpy(rng.data_ptr(), rng_bytes.data(), rng_bytes.size());
  try {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(rng);
  } catch (const c10::Error&) {
    throw Error("checkpoint " + c.record_path + " holds an invalid RNG state");
  }

  copy_model(c.weights, c.weights_prefix, model);
  if (optimizer) {
    auto& opt_state = optimizer->state();
    opt_state.clear();
    for (const auto& p : model.named_parameters()) {
      const std::string base = c.optimizer_prefix + p.key();
      if (!c.optimizer.contains(base + ".exp_avg")) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      // On the parameter's device: a checkpoint written on one device resumes on another.
      s->exp_avg(c.optimizer.at(base + ".exp_avg").to(p.value().options(), /*non_blocking=*/false, /*copy=*/true));
      s->exp_avg_sq(c.optimizer.at(base + ".exp_avg_sq").to(p.value().options(), false, true));
      s->step(c.optimizer.at(base + ".step").item<int64_t>());
      opt_state[optimizer_key(p.value())] = std::move(s);
    }
  }
  state = c.state;
  return true;
}

int64_t load_checkpoint_weights(const std::string& run_dir, torch::nn::Module& model, int64_t step) {
  const auto chosen = chosen_step(run_dir, step);
  if (!chosen) throw Error("run " + run_dir + " has no checkpoint");
  const StoredCheckpoint c = read_stored_checkpoint(run_dir, *chosen, false);
  check_model_fits(c.weights, c.weights_path, c.weights_prefix, model);
  copy_model(c.weights, c.weights_prefix, model);
  return *chosen;
}

}  // namespace seqmix

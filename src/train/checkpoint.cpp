#include "seqmix/train/checkpoint.h"

#include <torch/torch.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <cstring>
#include <regex>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/io/safetensors.h"

namespace seqmix {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "seqmix-checkpoint-1";

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

// Every parameter and buffer of the model, as model.<name>, with its shape and dtype.
void check_model_fits(const SafetensorsFile& file, const std::string& path, torch::nn::Module& model) {
  for (const auto& p : model.named_parameters()) expect_tensor(file, path, "model." + p.key(), p.value());
  for (const auto& b : model.named_buffers()) expect_tensor(file, path, "model." + b.key(), b.value());
}

void copy_model(const SafetensorsFile& file, torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters()) p.value().copy_(file.at("model." + p.key()));
  for (const auto& b : model.named_buffers()) b.value().copy_(file.at("model." + b.key()));
}

// The model's parameters and buffers as a checkpoint names them, model.<name>.
std::vector<std::pair<std::string, torch::Tensor>> model_tensors(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : model.named_parameters()) tensors.emplace_back("model." + p.key(), p.value());
  for (const auto& b : model.named_buffers()) tensors.emplace_back("model." + b.key(), b.value());
  return tensors;
}

}  // namespace

void save_model_weights(const std::string& path, torch::nn::Module& model) {
  write_file_atomically(path, serialize_safetensors(model_tensors(model), {{"format", kFormat}}));
}

void load_model_weights(const std::string& path, torch::nn::Module& model) {
  const SafetensorsFile file = read_safetensors(path);
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kFormat)
    throw Error(path + " is not a seqmix checkpoint: its metadata has no format=" + kFormat +
                " (from Python: safetensors.torch.save_file(tensors, path, metadata={'format': '" + kFormat + "'}))");
  check_model_fits(file, path, model);
  copy_model(file, model);
}

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
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
                     const TrainerState& state, int64_t keep_last) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  fs::create_directories(dir);
  std::vector<std::pair<std::string, torch::Tensor>> tensors = model_tensors(model);
  auto& opt_state = optimizer.state();
  for (const auto& p : model.named_parameters()) {
    auto it = opt_state.find(optimizer_key(p.value()));
    if (it == opt_state.end()) continue;
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    tensors.emplace_back("optimizer." + p.key() + ".exp_avg", s.exp_avg());
    tensors.emplace_back("optimizer." + p.key() + ".exp_avg_sq", s.exp_avg_sq());
    tensors.emplace_back("optimizer." + p.key() + ".step", torch::tensor(s.step(), torch::kLong));
  }
  const std::string name = step_name(state.step);
  const std::string bytes = serialize_safetensors(tensors, {{"format", kFormat}});
  write_file_atomically((dir / (name + ".safetensors")).string(), bytes);

  auto rng = at::detail::getDefaultCPUGenerator().get_state();
  nlohmann::json j;
  j["format"] = kFormat;
  j["step"] = state.step;
  j["data_cursor"] = state.step;
  j["tensors"] = name + ".safetensors";
  j["tensors_bytes"] = bytes.size();
  j["tensors_fnv1a64"] = std::to_string(fnv1a64(bytes));
  j["rng"]["torch_cpu"] = to_hex(std::string(static_cast<const char*>(rng.data_ptr()), rng.numel()));
  j["final"] = metrics_json(state.final_metrics);
  j["best"] = metrics_json(state.best_metrics);
  j["best_step"] = state.best_step;
  j["stopped_early"] = state.stopped_early;
  j["skipped_nonfinite"] = state.skipped_nonfinite;
  j["interval"] = {{"steps", state.interval_steps}, {"loss", state.interval_loss}, {"aux", state.interval_aux}};
  j["wall_seconds"] = state.wall_seconds;
  write_file_atomically((dir / (name + ".json")).string(), j.dump(2) + "\n");

  // Keep the newest keep_last: remove the record first, so a half-removed checkpoint is never listed.
  const auto steps = list_checkpoints(run_dir);
  for (size_t i = 0; keep_last > 0 && i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    const std::string old = step_name(steps[i]);
    fs::remove(dir / (old + ".json"));
    fs::remove(dir / (old + ".safetensors"));
  }
}

bool load_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::AdamW* optimizer,
                     TrainerState& state, int64_t step) {
  const auto steps = list_checkpoints(run_dir);
  if (steps.empty()) return false;
  if (step < 0) step = steps.back();
  if (std::find(steps.begin(), steps.end(), step) == steps.end())
    throw Error("run " + run_dir + " has no checkpoint at step " + std::to_string(step));
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  const std::string record_path = (dir / (step_name(step) + ".json")).string();
  const std::string where = "checkpoint " + record_path;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(record_path));
  } catch (const nlohmann::json::exception&) {
    throw Error(where + " is not valid JSON (corrupt or truncated)");
  }
  TrainerState loaded;
  std::string tensors_name, checksum, rng_hex;
  uint64_t tensors_bytes = 0;
  try {
    if (j.at("format").get<std::string>() != kFormat) throw Error(where + " has an unknown format");
    loaded.step = j.at("step").get<int64_t>();
    tensors_name = j.at("tensors").get<std::string>();
    tensors_bytes = j.at("tensors_bytes").get<uint64_t>();
    checksum = j.at("tensors_fnv1a64").get<std::string>();
    rng_hex = j.at("rng").at("torch_cpu").get<std::string>();
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
  // A record commits the tensors written with it, named after its step.
  if (tensors_name != step_name(step) + ".safetensors")
    throw Error(where + " names a tensors file other than its own (" + step_name(step) + ".safetensors)");
  const std::string tensors_path = (dir / tensors_name).string();
  std::error_code ec;
  if (!fs::exists(tensors_path, ec)) throw Error(where + ": its tensors file " + tensors_path + " is missing");
  const std::string bytes = read_file(tensors_path);
  if (bytes.size() != tensors_bytes || std::to_string(fnv1a64(bytes)) != checksum)
    throw Error("checkpoint tensors " + tensors_path + " are truncated or corrupt (size or checksum mismatch)");
  const SafetensorsFile file = parse_safetensors(bytes, tensors_path);

  // Check everything before changing anything.
  check_model_fits(file, tensors_path, model);
  // A parameter's optimizer state is complete (both moments and a one-element step count) or absent.
  for (const auto& p : model.named_parameters()) {
    const std::string base = "optimizer." + p.key();
    if (!file.contains(base + ".exp_avg")) continue;
    expect_tensor(file, tensors_path, base + ".exp_avg", p.value());
    expect_tensor(file, tensors_path, base + ".exp_avg_sq", p.value());
    if (!file.contains(base + ".step") || file.at(base + ".step").numel() != 1 ||
        file.at(base + ".step").scalar_type() != torch::kLong)
      throw Error("checkpoint " + tensors_path + " does not fit the model: '" + base + ".step' is missing or not one int64");
  }
  const std::string rng_bytes = from_hex(rng_hex, where);
  auto rng = torch::empty({static_cast<int64_t>(rng_bytes.size())}, torch::kByte);
  std::memcpy(rng.data_ptr(), rng_bytes.data(), rng_bytes.size());
  try {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(rng);
  } catch (const c10::Error&) {
    throw Error(where + " holds an invalid RNG state");
  }

  copy_model(file, model);
  if (optimizer) {
    auto& opt_state = optimizer->state();
    opt_state.clear();
    for (const auto& p : model.named_parameters()) {
      const std::string base = "optimizer." + p.key();
      if (!file.contains(base + ".exp_avg")) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->exp_avg(file.at(base + ".exp_avg").clone());
      s->exp_avg_sq(file.at(base + ".exp_avg_sq").clone());
      s->step(file.at(base + ".step").item<int64_t>());
      opt_state[optimizer_key(p.value())] = std::move(s);
    }
  }
  state = loaded;
  return true;
}

}  // namespace seqmix

#include "seqmix/dist/communicator.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#include <dlfcn.h>

#include <csignal>
#include <filesystem>
#include <cstdlib>
#include <functional>

#include "nccl_plugin.h"
#include "seqmix/io/error.h"
#include "seqmix/io/plugin.h"

namespace seqmix::dist {
namespace {

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return first_line(c10_error->what_without_backtrace());
  return first_line(e.what());
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// A whole-string decimal integer; nullopt when the variable is unset.
std::optional<long> env_integer(const char* name) {
  const auto text = env(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno != 0)
    throw Error("distributed: environment variable " + std::string(name) + "='" + *text + "' is not an integer");
  return value;
}

long required_env_integer(const char* name, const std::string& why) {
  const auto value = env_integer(name);
  if (!value) throw Error("distributed: environment variable " + std::string(name) + " is not set (" + why + ")");
  return *value;
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

struct Placement {
  int rank = 0, world_size = 1;
};

Placement check_placement(long rank, long world_size) {
  if (world_size < 1 || world_size > 4096) throw Error("distributed: world size " + std::to_string(world_size) + " must be in 1..4096");
  if (rank < 0 || rank >= world_size)
    throw Error("distributed: rank " + std::to_string(rank) + " must be in 0.." + std::to_string(world_size - 1) +
                " for world size " + std::to_string(world_size));
  return {static_cast<int>(rank), static_cast<int>(world_size)};
}

// torchrun's store: under its agent store every worker is a client under the restart's prefix (what
// torch.distributed's env:// rendezvous does); otherwise rank 0 serves it.
c10::intrusive_ptr<c10d::Store> tcp_store(const Placement& p, std::chrono::seconds timeout) {
  const std::string host = *env("MASTER_ADDR");
  const long port = required_env_integer("MASTER_PORT", "the port of rank 0's store");
  if (port < 1 || port > 65535) throw Error("distributed: MASTER_PORT " + std::to_string(port) + " must be in 1..65535");
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.numWorkers = static_cast<std::size_t>(p.world_size);
  options.timeout = timeout;
  if (env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True") {
    options.isServer = false;
    const std::string attempt = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
    return c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + attempt,
                                                  c10::make_intrusive<c10d::TCPStore>(host, options));
  }
  options.isServer = p.rank == 0;
  options.multiTenant = true;
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const auto ifname = env("GLOO_SOCKET_IFNAME"); ifname && !ifname->empty())
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname->substr(0, ifname->find(',')));
  if (is_loopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::Backend> gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, const Placement& p,
                                               const InitOptions& options, const std::string& master_addr) {
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gloo_options->devices.push_back(gloo_device(master_addr));
  gloo_options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, p.rank, p.world_size, gloo_options);
}

#ifdef SEQMIX_NCCL_PLUGIN
constexpr const char* kNcclPluginBuildPath = SEQMIX_NCCL_PLUGIN;
#else
constexpr const char* kNcclPluginBuildPath = nullptr;
#endif

NcclBackend nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, const Placement& p, const InitOptions& options) {
  if (!kNcclPluginBuildPath)
    throw Error("distributed: this seqmix was built without NCCL (its torch ships none); use --dist-backend gloo");
  static const MakeNcclBackendFn make = [] {
    void* plugin = open_plugin("distributed", kNcclPluginName, kNcclPluginBuildPath, RTLD_NOW | RTLD_LOCAL);
    return reinterpret_cast<MakeNcclBackendFn>(plugin_symbol(plugin, "distributed", kMakeNcclBackendSymbol));
  }();
  NcclRequest request;
  request.store = store;
  request.rank = p.rank;
  request.world_size = p.world_size;
  request.local_rank = static_cast<int>(env_integer("LOCAL_RANK").value_or(p.rank));
  request.timeout = options.timeout;
  NcclBackend out;
  std::string error;
  if (!make(request, out, error)) throw Error("distributed: rank " + std::to_string(p.rank) + ": " + error);
  return out;
}

}  // namespace

struct Communicator::State {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> group;
  c10::Device device{c10::kCPU};  // where the collectives run: the CPU (Gloo) or this rank's GPU (NCCL)

  // The tensors of a collective where the backend takes them: themselves on the CPU, copies on a GPU.
  std::vector<at::Tensor> staged(const std::vector<at::Tensor>& tensors) const {
    if (device.is_cpu()) return tensors;
    std::vector<at::Tensor> copies;
    for (const auto& t : tensors) copies.push_back(t.to(device));
    return copies;
  }
  // Writes a collective's results back into the CPU tensors it was staged from.
  void unstage(std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& on_device) const {
    if (device.is_cpu()) return;
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(on_device[i]);
  }

  // Runs one collective and waits for it; a failure (a peer gone, the timeout) becomes an Error.
  void run(const Communicator& self, const std::string& operation, const std::string& what,
           const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    try {
      start()->wait();
    } catch (const std::exception& e) {
      throw Error("distributed: " + self.description() + ": " + operation + " of " + what + " failed (" + message_of(e) +
                  "); another worker has probably exited, its own message says why");
    }
  }
};

bool launched_distributed() { return env("WORLD_SIZE").has_value(); }

bool restarted_by_torchrun() { return env_integer("TORCHELASTIC_RESTART_COUNT").value_or(0) > 0; }

std::shared_ptr<Communicator> Communicator::join(const InitOptions& options) {
  if (options.timeout.count() < 1) throw Error("distributed: the timeout must be at least 1 second");
  if (options.backend != "gloo" && options.backend != "nccl")
    throw Error("distributed: unknown backend '" + options.backend + "' (valid: gloo, nccl)");
  // Gloo writes to its peers' sockets: a peer that died must fail the collective with an error, not kill
  // this process with SIGPIPE (Python ignores SIGPIPE for the same reason).
  std::signal(SIGPIPE, SIG_IGN);
  auto state = std::make_unique<State>();
  Placement placement;
  std::string master_addr;
  const std::string& init = options.init_method;
  const long local_world = env_integer("LOCAL_WORLD_SIZE").value_or(0);
  bool created_store_file = false;
  // A store file this join created and left behind would hand its stale keys to the next job naming it.
  auto forget_store = [&] {
    state.reset();
    if (!created_store_file) return;
    std::error_code ignored;
    std::filesystem::remove(init.substr(7), ignored);
  };
  try {
    if (init == "env://") {
      placement = check_placement(options.rank ? *options.rank : required_env_integer("RANK", "env:// needs it; torchrun sets it"),
                                  options.world_size ? *options.world_size : required_env_integer("WORLD_SIZE", "env:// needs it"));
      const auto addr = env("MASTER_ADDR");
      if (!addr || addr->empty()) throw Error("distributed: environment variable MASTER_ADDR is not set (env:// needs rank 0's address)");
      master_addr = *addr;
      state->store = tcp_store(placement, options.timeout);
    } else if (init.rfind("file://", 0) == 0) {
      const std::string path = init.substr(7);
      if (path.empty()) throw Error("distributed: --dist-init file://PATH needs a path");
      placement = check_placement(options.rank ? *options.rank : required_env_integer("RANK", "give --rank or set RANK"),
                                  options.world_size ? *options.world_size
                                                     : required_env_integer("WORLD_SIZE", "give --world-size or set WORLD_SIZE"));
      created_store_file = !std::filesystem::exists(path);
      state->store = c10::make_intrusive<c10d::FileStore>(path, placement.world_size);
    } else {
      throw Error("distributed: unknown init method '" + init + "' (expected env:// or file://PATH)");
    }
    state->store->setTimeout(options.timeout);
    if (options.backend == "nccl") {
      NcclBackend nccl = nccl_backend(state->store, placement, options);
      state->group = std::move(nccl.backend);
      state->device = nccl.device;
    } else {
      state->group = gloo_backend(state->store, placement, options, master_addr);
    }
  } catch (const Error&) {
    forget_store();
    throw;
  } catch (const std::exception& e) {
    forget_store();
    const std::string reason = message_of(e);
    const bool timed_out = reason.find("imeout") != std::string::npos || reason.find("imed out") != std::string::npos;
    throw Error("distributed: rank " + std::to_string(placement.rank) + " could not join the job of " +
                std::to_string(placement.world_size) + " at " + init + ": " + reason +
                (timed_out ? " after " + std::to_string(options.timeout.count()) +
                                 " s; is every worker started, with the same rendezvous?"
                           : ""));
  }
  const int local = local_world > 0 ? static_cast<int>(local_world) : placement.world_size;
  return std::shared_ptr<Communicator>(
      new Communicator(std::move(state), placement.rank, placement.world_size, local, init, options.backend));
}

Communicator::Communicator(std::unique_ptr<State> state, int rank, int world_size, int local_world_size, std::string init,
                           std::string backend)
    : state_(std::move(state)), rank_(rank), world_size_(world_size), local_world_size_(local_world_size),
      init_(std::move(init)), backend_(std::move(backend)) {}

Communicator::~Communicator() = default;

std::string Communicator::description() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + " (" + backend_ + ", " + init_ + ")";
}

void Communicator::all_reduce_sum(at::Tensor& tensor, const std::string& what) {
  std::vector<at::Tensor> tensors{tensor};
  auto staged = state_->staged(tensors);
  state_->run(*this, "all-reduce", what, [&] { return state_->group->allreduce(staged); });
  state_->unstage(tensors, staged);
}

void Communicator::all_reduce_max(at::Tensor& tensor, const std::string& what) {
  std::vector<at::Tensor> tensors{tensor};
  auto staged = state_->staged(tensors);
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  state_->run(*this, "all-reduce (max)", what, [&] { return state_->group->allreduce(staged, options); });
  state_->unstage(tensors, staged);
}

void Communicator::broadcast(std::vector<at::Tensor>& tensors, const std::string& what) {
  // One collective per tensor (Gloo's broadcast takes one tensor per process).
  for (auto& tensor : tensors) {
    std::vector<at::Tensor> one{tensor};
    auto staged = state_->staged(one);
    state_->run(*this, "broadcast", what, [&] { return state_->group->broadcast(staged); });
    state_->unstage(one, staged);
  }
}

void Communicator::all_reduce_sum_all(std::vector<at::Tensor>& tensors, const std::string& what) {
  if (tensors.empty()) return;
  const auto staged = state_->staged(tensors);
  std::vector<std::vector<at::Tensor>> singles;
  singles.reserve(staged.size());
  for (const auto& tensor : staged) singles.push_back({tensor});
  state_->run(*this, "all-reduce", what, [&] {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto& single : singles) works.push_back(state_->group->allreduce(single));
    for (size_t i = 0; i + 1 < works.size(); ++i) works[i]->wait();
    return works.back();
  });
  state_->unstage(tensors, staged);
}

std::vector<at::Tensor> Communicator::all_gather(const at::Tensor& tensor, const std::string& what) {
  std::vector<at::Tensor> inputs = state_->staged({tensor.contiguous()});
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size_; ++r) outputs[0].push_back(torch::empty_like(inputs[0]));
  state_->run(*this, "all-gather", what, [&] { return state_->group->allgather(outputs, inputs); });
  for (auto& gathered : outputs[0]) gathered = gathered.to(tensor.device());
  return outputs[0];
}

void Communicator::check_same(int64_t value, const std::string& what) {
  auto bounds = torch::tensor({value, -value}, torch::kInt64);
  all_reduce_max(bounds, what);
  const int64_t highest = bounds[0].item<int64_t>(), lowest = -bounds[1].item<int64_t>();
  if (highest != lowest)
    throw Error("distributed: the ranks disagree on " + what + " (from " + std::to_string(lowest) + " to " +
                std::to_string(highest) + "; this rank has " + std::to_string(value) + ")");
}

}  // namespace seqmix::dist

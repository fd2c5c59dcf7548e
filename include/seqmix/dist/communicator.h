#pragma once
// The process group of a data-parallel job, on PyTorch's c10d: ProcessGroupGloo on the CPU tensors the models
// train on, or ProcessGroupNCCL (--dist-backend nccl: the libseqmix_nccl.so plugin, built where torch ships
// NCCL; each collective's tensors are staged through the rank's GPU, cuda:LOCAL_RANK; never run on a GPU
// here, docs/distributed.md). A job starts in one of three ways:
//   torchrun      RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT in the environment; under
//                 torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) every rank is a TCPStore
//                 client under the prefix /worker/attempt_<TORCHELASTIC_RESTART_COUNT>, else rank 0
//                 serves the store;
//   file://PATH   a FileStore at PATH shared by the ranks (a fresh path per job), rank and world size
//                 given or in RANK and WORLD_SIZE;
//   --nproc N     seqmix's own launcher (launcher.h) sets the torchrun variables for N local workers.
// Gloo's device comes from GLOO_SOCKET_IFNAME when set, else from the hostname (loopback for --nproc).
// Every collective waits at most `timeout`; a peer that exits makes the collective fail at once. Either
// becomes a seqmix::Error naming the rank and the operation.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace seqmix::dist {

struct InitOptions {
  std::string init_method = "env://";  // env:// (torchrun's variables) or file://PATH
  std::optional<int> rank;             // file://: else RANK
  std::optional<int> world_size;       // file://: else WORLD_SIZE
  std::chrono::seconds timeout{300};   // for the store and every collective
  std::string backend = "gloo";        // gloo, or nccl (a GPU per local rank)
};

// Whether the environment describes a distributed job (WORLD_SIZE is set), i.e. whether a plain
// `seqmix train` was started by torchrun or by --nproc.
bool launched_distributed();

// torchrun's restart of a failed job (TORCHELASTIC_RESTART_COUNT > 0): the workers continue their run.
bool restarted_by_torchrun();

class Communicator {
 public:
  // Joins the job: builds the store and the Gloo process group. Throws Error on a malformed environment
  // or init method, or when the other ranks do not arrive within the timeout.
  static std::shared_ptr<Communicator> join(const InitOptions& options);
  ~Communicator();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_world_size() const { return local_world_size_; }  // ranks on this machine (LOCAL_WORLD_SIZE)
  std::string description() const;  // e.g. "rank 1 of 2 (gloo, file:///tmp/x)"
  const std::string& backend() const { return backend_; }

  // In place, every rank: the sum over ranks / the elementwise max / rank 0's values.
  void all_reduce_sum(at::Tensor& tensor, const std::string& what);
  void all_reduce_max(at::Tensor& tensor, const std::string& what);
  void broadcast(std::vector<at::Tensor>& tensors, const std::string& what);
  // Starts sum all-reduces of the tensors (one collective each, issued in order) and waits for all of
  // them: the gradient buckets of one step travel together.
  void all_reduce_sum_all(std::vector<at::Tensor>& tensors, const std::string& what);
  // Every rank's tensor (all of one shape and dtype), in rank order, on every rank.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const std::string& what);
  // Throws Error naming `what` unless every rank passes the same value.
  void check_same(int64_t value, const std::string& what);

 private:
  struct State;
  Communicator(std::unique_ptr<State> state, int rank, int world_size, int local_world_size, std::string init,
               std::string backend);
  std::unique_ptr<State> state_;
  int rank_ = 0, world_size_ = 1, local_world_size_ = 1;
  std::string init_, backend_;
};

}  // namespace seqmix::dist

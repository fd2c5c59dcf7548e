#pragma once
// The interface of libseqmix_nccl.so (nccl_plugin.cpp): c10d's ProcessGroupNCCL for --dist-backend nccl. A
// plugin, built where torch ships NCCL, so the seqmix program links no CUDA library; the communicator loads
// it when a job asks for NCCL. Nothing here has run on a GPU (this project's machines have none).
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace seqmix::dist {

struct NcclRequest {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0, world_size = 1;
  int local_rank = 0;  // the GPU of this rank: cuda:local_rank
  std::chrono::milliseconds timeout{300000};
};

struct NcclBackend {
  c10::intrusive_ptr<c10d::Backend> backend;
  c10::Device device{c10::kCPU};  // where the collectives' tensors must live
};

// Fills `out`, or returns false with a one-line reason in `error`: no exception crosses the plugin boundary.
using MakeNcclBackendFn = bool (*)(const NcclRequest& request, NcclBackend& out, std::string& error);
constexpr const char* kMakeNcclBackendSymbol = "seqmix_make_nccl_backend";
constexpr const char* kNcclPluginName = "libseqmix_nccl.so";

}  // namespace seqmix::dist

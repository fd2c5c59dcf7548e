// libseqmix_nccl.so: ProcessGroupNCCL behind nccl_plugin.h. Compiled and linked on every build whose torch
// ships NCCL; it has never run here (no GPU), docs/distributed.md says so.
#include "nccl_plugin.h"

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <exception>

extern "C" __attribute__((visibility("default"))) bool seqmix_make_nccl_backend(
    const seqmix::dist::NcclRequest& request, seqmix::dist::NcclBackend& out, std::string& error) {
  try {
    const int devices = static_cast<int>(c10::cuda::device_count());
    if (devices == 0) {
      error = "the nccl backend needs a CUDA device and this machine has none; use --dist-backend gloo";
      return false;
    }
    if (request.local_rank >= devices) {
      error = "local rank " + std::to_string(request.local_rank) + " has no GPU of its own (this machine has " +
              std::to_string(devices) + "); start at most one worker per GPU";
      return false;
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(request.local_rank));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = request.timeout;
    out.backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(request.store, request.rank, request.world_size, options);
    out.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(request.local_rank));
    return true;
  } catch (const std::exception& e) {
    const std::string text = e.what();
    error = "cannot start NCCL: " + text.substr(0, text.find('\n'));
    return false;
  }
}

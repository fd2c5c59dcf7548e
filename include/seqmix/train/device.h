#pragma once
// The device a command computes on (config key `device`, `--device` of train, eval, generate, mad and bench): the
// CPU, or a CUDA GPU. Asking for a GPU this build or this machine does not have is an error, never a CPU run.
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace seqmix {

// "cpu", "cuda" (the first GPU) or "cuda:N". Throws Error naming `what` (e.g. "--device") when the name is unknown,
// this build has no CUDA support, no GPU is visible, or N is not one of them.
c10::Device parse_device(const std::string& name, const std::string& what);

// Whether this build links LibTorch's CUDA half (CMake option SEQMIX_CUDA).
bool cuda_built();

// The GPUs this process sees (CUDA_VISIBLE_DEVICES applies): none in a CPU-only build or on a machine without one.
struct GpuFacts {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  int major = 0, minor = 0;  // compute capability, e.g. 9.0 for Hopper
};
std::vector<GpuFacts> visible_gpus();

}  // namespace seqmix

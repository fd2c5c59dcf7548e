// The devices a command can compute on (device.h). Compiled with CUDA's runtime headers when SEQMIX_CUDA is on
// (CMakeLists.txt, seqmix_cuda_source); the properties come through libtorch_cuda, so nothing links cudart itself.
#include "seqmix/train/device.h"

#include <torch/cuda.h>

#include "seqmix/io/error.h"

#if SEQMIX_CUDA
#include <ATen/cuda/CUDAContext.h>  // at::cuda::getDeviceProperties, in libtorch_cuda (linked with SEQMIX_CUDA)
#endif

namespace seqmix {

bool cuda_built() { return SEQMIX_CUDA != 0; }

std::vector<GpuFacts> visible_gpus() {
  std::vector<GpuFacts> out;
#if SEQMIX_CUDA
  const int count = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < count; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(i);
    out.push_back({i, p->name, static_cast<int64_t>(p->totalGlobalMem), p->major, p->minor});
  }
#endif
  return out;
}

c10::Device parse_device(const std::string& name, const std::string& what) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  const bool cuda_name = name == "cuda" || name.rfind("cuda:", 0) == 0;
  if (!cuda_name) throw Error(what + ": unknown device '" + name + "'; valid devices: cpu, cuda, cuda:N");
  int index = 0;
  if (name != "cuda") {
    const std::string digits = name.substr(5);
    if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw Error(what + ": '" + name + "' is not a device; write cuda or cuda:N with N a GPU's index");
    index = std::stoi(digits);
  }
  if (!cuda_built())
    throw Error(what + " " + name + ": this seqmix was built without CUDA support (SEQMIX_CUDA=OFF: CMake found no " +
                "CUDA build of torch or no nvcc); seqmix info says how it was built");
  const int count = static_cast<int>(torch::cuda::device_count());
  if (count == 0) throw Error(what + " " + name + ": no GPU is visible to this process (seqmix info lists the GPUs)");
  if (index >= count)
    throw Error(what + " " + name + ": there is no GPU " + std::to_string(index) + "; this process sees " +
                std::to_string(count) + " (cuda:0" + (count > 1 ? " to cuda:" + std::to_string(count - 1) : "") + ")");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace seqmix

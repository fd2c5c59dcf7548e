// The C++ safetensors reader as an operator, torch.ops.seqmix.read_safetensors, for python/seqmix: its tests
// hold the package's pure-Python checkpoint reader to it. (libseqmix_ops.so links the whole seqmix library, so
// loading it registers every op family's operators too.)
#include <torch/library.h>
#include <torch/torch.h>

#include "seqmix/io/safetensors.h"

namespace {

// A safetensors file's tensors by the C++ reader, in file order.
std::tuple<std::vector<std::string>, std::vector<at::Tensor>> read_safetensors_file(c10::string_view path) {
  seqmix::SafetensorsFile file;
  try {
    file = seqmix::read_safetensors(std::string(path));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  for (auto& [name, tensor] : file.tensors) {
    names.push_back(name);
    tensors.push_back(tensor);
  }
  return {names, tensors};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  m.def("read_safetensors(str path) -> (str[] names, Tensor[] tensors)", &read_safetensors_file);
}

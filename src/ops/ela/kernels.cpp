// The kernel table of Exact Linear Attention: the four built-in kernels with their feature maps, and
// user kernels registered at run time. Feature maps are plain differentiable ATen expressions.
#include <ATen/ATen.h>

#include <map>
#include <mutex>

#include "seqmix/io/error.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {
namespace {

at::Tensor squared_norm(const at::Tensor& x) { return (x * x).sum(-1, true); }
at::Tensor ones_column(const at::Tensor& x) { return at::ones_like(x.narrow(-1, 0, 1)); }

// ||x||, kept differentiable at x = 0 by a floor of 1e-6 inside the root (it only ever grows the
// norm, so q.k + |q||k| stays >= 0).
at::Tensor smooth_norm(const at::Tensor& x) { return (squared_norm(x) + 1e-12).sqrt(); }

// ||q + s k||^2 = ||q||^2 + ||k||^2 + 2 s q.k with phi(q) = [q, ||q||^2, 1], psi(k) = [2 s k, 1, ||k||^2].
ExactKernel squared_euclidean(const std::string& name, double sign, const std::string& description) {
  ExactKernel kernel;
  kernel.name = name;
  kernel.description = description;
  kernel.query_features = [](const at::Tensor& q) { return at::cat({q, squared_norm(q), ones_column(q)}, -1); };
  kernel.key_features = [sign](const at::Tensor& k) {
    return at::cat({k * (2.0 * sign), ones_column(k), squared_norm(k)}, -1);
  };
  return kernel;
}

std::map<std::string, ExactKernel> builtin_kernels() {
  std::map<std::string, ExactKernel> table;
  ExactKernel hadamard;
  hadamard.name = "hadamard_exp";
  hadamard.description = "sum_d exp(q_d) exp(k_d): phi = exp(q), psi = exp(k), with exactly cancelling shifts";
  hadamard.exponential = true;
  table[hadamard.name] = hadamard;
  table["sum_sq_euclidean"] = squared_euclidean("sum_sq_euclidean", 1.0,
                                                "||q + k||^2: phi = [q, |q|^2, 1], psi = [2k, 1, |k|^2]");
  table["sub_sq_euclidean"] = squared_euclidean("sub_sq_euclidean", -1.0,
                                                "||q - k||^2: phi = [q, |q|^2, 1], psi = [-2k, 1, |k|^2]");
  ExactKernel custom;
  custom.name = "direction_magnitude";
  custom.description =
      "1 + |q||k|(1 + cos(q,k)) = q.k + |q||k| + 1 >= 1: phi = [q, |q|, 1], psi = [k, |k|, 1]";
  custom.query_features = [](const at::Tensor& q) { return at::cat({q, smooth_norm(q), ones_column(q)}, -1); };
  custom.key_features = custom.query_features;
  table[custom.name] = custom;
  return table;
}

struct KernelTable {
  std::mutex mutex;
  std::map<std::string, ExactKernel> kernels = builtin_kernels();
};
KernelTable& table() {
  static KernelTable t;
  return t;
}

}  // namespace

std::vector<std::string> exact_kernel_names() {
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<std::string> names;
  for (const auto& entry : t.kernels) names.push_back(entry.first);
  return names;
}

const ExactKernel& exact_kernel(const std::string& name) {
  auto& t = table();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.kernels.find(name);
    if (it != t.kernels.end()) return it->second;  // entries are never removed, so the reference stays valid
  }
  std::string valid;
  for (const auto& n : exact_kernel_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error("unknown ELA kernel '" + name + "'; valid kernels: " + valid);
}

void check_row_sums(const ExactKernel& kernel, const at::Tensor& row_sums) {
  if (kernel.builtin) return;
  TORCH_CHECK((row_sums >= 0).all().item<bool>(), "ELA kernel '", kernel.name,
              "' gave a negative or NaN row sum: its feature maps must make a finite, non-negative kernel");
}

void register_exact_kernel(const std::string& name, const std::string& description, FeatureFn query_features,
                           FeatureFn key_features) {
  if (name.empty()) throw Error("register_exact_kernel: the kernel needs a name");
  if (!query_features || !key_features)
    throw Error("register_exact_kernel: kernel '" + name + "' needs both feature maps (query and key)");
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (t.kernels.count(name)) throw Error("register_exact_kernel: a kernel named '" + name + "' already exists");
  ExactKernel kernel;
  kernel.name = name;
  kernel.description = description;
  kernel.query_features = std::move(query_features);
  kernel.key_features = std::move(key_features);
  kernel.builtin = false;
  t.kernels[name] = kernel;
}

}  // namespace seqmix::ops

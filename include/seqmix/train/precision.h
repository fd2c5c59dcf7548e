#pragma once
// A run's compute precision (config key train.dtype, `seqmix train --dtype`): float32, or bfloat16 under
// autocast, as torch.autocast runs it: matrix products in bfloat16 while the weights, their gradients and the
// optimizer state stay float32 (so checkpoints are float32 whatever the precision), and seqmix's ops take their
// reduced-precision inputs and compute in float32.
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace seqmix {

enum class Precision { fp32, bf16 };

// "fp32" or "bf16"; anything else throws Error naming `what` (e.g. "--dtype") and the valid names.
Precision parse_precision(const std::string& name, const std::string& what);
std::string precision_name(Precision precision);
const std::vector<std::string>& precision_names();

// Autocast to the precision's dtype on `device` for the guard's lifetime, nothing for fp32. Nests, and restores
// what was set before (the autocast cache is cleared when the outermost guard ends, as torch.autocast does).
class AutocastGuard {
 public:
  explicit AutocastGuard(Precision precision, c10::DeviceType device = c10::DeviceType::CPU);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

}  // namespace seqmix

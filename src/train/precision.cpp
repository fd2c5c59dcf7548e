#include "seqmix/train/precision.h"

#include <ATen/autocast_mode.h>

#include "seqmix/io/error.h"

namespace seqmix {

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names{"fp32", "bf16"};
  return names;
}

Precision parse_precision(const std::string& name, const std::string& what) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  throw Error(what + ": unknown dtype '" + name + "' (valid: fp32, bf16)");
}

std::string precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "fp32"; }

AutocastGuard::AutocastGuard(Precision precision, c10::DeviceType device) : device_(device) {
  if (precision == Precision::fp32) return;
  active_ = true;
  was_enabled_ = at::autocast::is_autocast_enabled(device_);
  was_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, c10::ScalarType::BFloat16);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, was_enabled_);
  at::autocast::set_autocast_dtype(device_, was_dtype_);
}

}  // namespace seqmix

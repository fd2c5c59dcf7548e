#pragma once
// What the op families' bad_calls.cpp share: the table's BadCall, small sizes and input makers (float64).
#include <torch/torch.h>

#include <limits>
#include <vector>

#include "seqmix/ops/op_table.h"

namespace seqmix::ops::bad_call_support {

constexpr int64_t kB = 2, kT = 5, kH = 2, kDk = 4, kDv = 3, kC = 3, kN = 4;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const torch::Device kCpu(torch::kCPU);
const auto kF64 = torch::TensorOptions().dtype(torch::kDouble);

inline torch::Tensor rnd(std::vector<int64_t> shape) { return torch::randn(shape, kF64); }
inline torch::Tensor positive(std::vector<int64_t> shape) { return torch::rand(shape, kF64) + 0.5; }
inline torch::Tensor all_true(std::vector<int64_t> shape) { return torch::ones(shape, torch::kBool); }

}  // namespace seqmix::ops::bad_call_support

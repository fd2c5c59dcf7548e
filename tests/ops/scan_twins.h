#pragma once
// Comparing a linear scan's implementation with its naive twin (fused_gla_test.cpp, chunked_scan_test.cpp): outputs
// {numerator, normaliser} and the gradients of every input, the implementation in fp64 (tight) and fp32 (loose)
// against the naive twin in fp64.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "seqmix/ops/prior_read.h"
#include "support/test_support.h"

namespace seqmix::scan_twins {

struct Shape {
  int64_t B, T, H, dk, dv;
};

inline std::string describe(const Shape& s) {
  return "B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " H" + std::to_string(s.H) + " dk" +
         std::to_string(s.dk) + " dv" + std::to_string(s.dv);
}

// Outputs and gradients: {numerator, normaliser, dq, dk, dv[, dlog_decay]}.
using Reads = std::vector<torch::Tensor>;
using Op = std::function<ops::PriorRead(const std::vector<torch::Tensor>&)>;

inline Reads run(const Op& op, const std::vector<torch::Tensor>& inputs, const torch::Tensor& grad_numerator,
                 const torch::Tensor& grad_normaliser, torch::ScalarType type) {
  std::vector<torch::Tensor> leaves;
  for (const auto& t : inputs) leaves.push_back(t.to(type).detach().clone().requires_grad_());
  auto read = op(leaves);
  torch::autograd::backward({read.numerator, read.normaliser}, {grad_numerator.to(type), grad_normaliser.to(type)});
  Reads out{read.numerator, read.normaliser};
  for (const auto& leaf : leaves) out.push_back(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf));
  return out;
}

// fp64 within 1e-10, fp32 within 2e-4 relative; the absolute floor scales with the largest entry, since the reads
// are sums of signed terms.
inline void expect_matches(const Op& implementation, const Op& naive, const std::vector<torch::Tensor>& inputs,
                           const torch::Tensor& grad_numerator, const torch::Tensor& grad_normaliser) {
  const auto ref = run(naive, inputs, grad_numerator, grad_normaliser, torch::kDouble);
  const auto f64 = run(implementation, inputs, grad_numerator, grad_normaliser, torch::kDouble);
  const auto f32 = run(implementation, inputs, grad_numerator, grad_normaliser, torch::kFloat);
  testing::TwinTolerances tolerances;
  tolerances.scale_atol = true;
  std::vector<std::string> names = {"numerator", "normaliser", "dq", "dk", "dv", "dlog_decay"};
  names.resize(ref.size());  // linear attention has no log_decay
  testing::expect_twins_close(ref, f64, f32, names, tolerances);
}

}  // namespace seqmix::scan_twins

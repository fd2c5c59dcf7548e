// Every fused kernel gives the same outputs and gradients on one thread as on two: the kernels split work
// across threads (at::parallel_for over batch x heads, blocks or channels), and the split must not change
// the result. The rest of the fast suite runs with OMP_NUM_THREADS=1 (ctest runs tests side by side on all
// cores), so this is where the threaded paths run. The op list is the op table's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "seqmix/ops/op_table.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

struct Outputs {
  std::vector<torch::Tensor> values, gradients;
};

Outputs run_on_threads(const ops::BenchCaseDeclaration& bench, int threads) {
  at::set_num_threads(threads);
  torch::manual_seed(7);
  // Awkward sizes: odd batch and heads, a length that crosses the kernels' blocks and ends inside one.
  const ops::OpShape shape{3, 77, 3, 8, 5};
  auto op_case = bench.make(ops::Impl::fused, shape);
  Outputs out;
  out.values = op_case.run();
  torch::Tensor loss = torch::zeros({}, out.values.front().options());
  for (size_t i = 0; i < out.values.size(); ++i)
    if (out.values[i].requires_grad())
      loss = loss + (out.values[i] * torch::linspace(-1, 1, out.values[i].numel(), out.values[i].options())
                                         .view_as(out.values[i]))
                        .sum();
  for (auto& leaf : op_case.leaves) leaf.mutable_grad() = torch::Tensor();
  if (loss.requires_grad()) loss.backward();
  for (auto& v : out.values) v = v.detach();
  for (auto& leaf : op_case.leaves)
    out.gradients.push_back(leaf.grad().defined() ? leaf.grad().clone() : torch::zeros_like(leaf));
  return out;
}

class FusedKernelThreads : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedKernelThreads, TwoThreadsEqualOne) {
  const auto& bench = ops::bench_case(GetParam());
  const int before = at::get_num_threads();
  const auto one = run_on_threads(bench, 1), two = run_on_threads(bench, 2);
  at::set_num_threads(before);
  ASSERT_EQ(one.values.size(), two.values.size());
  for (size_t i = 0; i < one.values.size(); ++i) EXPECT_CLOSE(two.values[i], one.values[i], 1e-6, 1e-6) << "output " << i;
  ASSERT_EQ(one.gradients.size(), two.gradients.size());
  for (size_t i = 0; i < one.gradients.size(); ++i)
    EXPECT_CLOSE(two.gradients[i], one.gradients[i], 1e-5, 1e-6) << "gradient of input " << i;
}

std::vector<std::string> fused_bench_cases() {
  std::vector<std::string> names;
  for (const auto* bench : ops::bench_cases())
    if (bench->impls.contains(ops::Impl::fused)) names.push_back(bench->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(OpTable, FusedKernelThreads, ::testing::ValuesIn(fused_bench_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace seqmix

#pragma once
// Shared test helpers: relative-error comparison with a NaN guard, and an fp64 finite-difference
// gradient check.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace seqmix::testing {

// |actual - expected| <= atol + rtol * |expected| elementwise, same shape, no NaN or Inf in either.
::testing::AssertionResult assert_close(const torch::Tensor& actual, const torch::Tensor& expected,
                                        double rtol, double atol = 0.0);
#define EXPECT_CLOSE(actual, expected, rtol, atol) \
  EXPECT_TRUE(::seqmix::testing::assert_close((actual), (expected), (rtol), (atol)))

// A fused kernel against its naive twin: the fused fp64 and fp32 results against the fp64 naive reference,
// entry i reported as names[i]. With scale_atol the absolute floors grow with 1 + max|reference| (reads
// that are sums of signed terms).
struct TwinTolerances {
  double fp64_rtol = 1e-10, fp64_atol = 1e-12, fp32_rtol = 2e-4, fp32_atol = 2e-5;
  bool scale_atol = false;
};
void expect_twins_close(const std::vector<torch::Tensor>& reference, const std::vector<torch::Tensor>& fused64,
                        const std::vector<torch::Tensor>& fused32, const std::vector<std::string>& names,
                        const TwinTolerances& tolerances = {});

// Central finite differences of a random projection of fn's output against autograd, in fp64, for
// every input that requires grad. Checks up to max_elements entries per input (spread over the tensor).
::testing::AssertionResult gradcheck(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& fn,
                                     std::vector<torch::Tensor> inputs, double eps = 1e-6, double rtol = 1e-5,
                                     double atol = 1e-7, int64_t max_elements = 64);

// fp64 standard normals of the given shape from their own generator: the same tensor for the same seed.
torch::Tensor seeded_randn(std::vector<int64_t> shape, uint64_t seed);

// Casts every parameter and buffer of a module to fp64.
void to_double(torch::nn::Module& module);

// Path of ../shared/data/<relative>, or empty if the file is absent (tests then skip).
std::string shared_data(const std::string& relative);

}  // namespace seqmix::testing

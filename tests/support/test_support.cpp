#include "support/test_support.h"

#include <filesystem>
#include <sstream>

namespace seqmix::testing {

::testing::AssertionResult assert_close(const torch::Tensor& actual, const torch::Tensor& expected, double rtol,
                                        double atol) {
  if (!actual.defined() || !expected.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << actual.sizes() << " != expected " << expected.sizes();
  auto a = actual.detach().to(torch::kDouble), e = expected.detach().to(torch::kDouble);
  if (!torch::isfinite(a).all().item<bool>()) return ::testing::AssertionFailure() << "actual has NaN or Inf";
  if (!torch::isfinite(e).all().item<bool>()) return ::testing::AssertionFailure() << "expected has NaN or Inf";
  if (a.numel() == 0) return ::testing::AssertionSuccess();
  auto err = (a - e).abs();
  auto bound = atol + rtol * e.abs();
  auto excess = err - bound;
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  if (excess.flatten()[worst].item<double>() <= 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << "max excess at flat index " << worst << ": actual " << a.flatten()[worst].item<double>() << ", expected "
     << e.flatten()[worst].item<double>() << " (|err| " << err.flatten()[worst].item<double>() << " > atol " << atol
     << " + rtol " << rtol << " * |expected|); max |err| overall " << err.max().item<double>();
  return ::testing::AssertionFailure() << os.str();
}

::testing::AssertionResult gradcheck(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& fn,
                                     std::vector<torch::Tensor> inputs, double eps, double rtol, double atol,
                                     int64_t max_elements) {
  for (auto& x : inputs)
    if (x.defined() && x.scalar_type() != torch::kDouble)
      return ::testing::AssertionFailure() << "gradcheck needs fp64 inputs";
  auto out = fn(inputs);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  auto weight = torch::randn(out.sizes(), gen, out.options()).detach();
  auto objective = [&](const std::vector<torch::Tensor>& xs) {
    torch::NoGradGuard no_grad;
    return (fn(xs) * weight).sum().item<double>();
  };
  std::vector<torch::Tensor> diff;
  std::vector<size_t> which;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff.push_back(inputs[i]);
      which.push_back(i);
    }
  auto grads = torch::autograd::grad({(out * weight).sum()}, diff, {}, false, false, /*allow_unused=*/true);
  for (size_t g = 0; g < which.size(); ++g) {
    const size_t i = which[g];
    auto analytic = grads[g].defined() ? grads[g] : torch::zeros_like(inputs[i]);
    const int64_t n = inputs[i].numel();
    const int64_t stride = std::max<int64_t>(1, n / max_elements);
    for (int64_t e = 0; e < n; e += stride) {
      std::vector<torch::Tensor> plus = inputs, minus = inputs;
      plus[i] = inputs[i].detach().clone();
      minus[i] = inputs[i].detach().clone();
      plus[i].view(-1)[e] += eps;
      minus[i].view(-1)[e] -= eps;
      const double numeric = (objective(plus) - objective(minus)) / (2 * eps);
      const double got = analytic.reshape(-1)[e].item<double>();
      if (!std::isfinite(got) || std::abs(got - numeric) > atol + rtol * std::abs(numeric))
        return ::testing::AssertionFailure() << "input " << i << " element " << e << ": autograd " << got
                                             << " vs finite difference " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

void to_double(torch::nn::Module& module) { module.to(torch::kDouble); }

std::string shared_data(const std::string& relative) {
  const std::filesystem::path p = std::filesystem::path(SEQMIX_SHARED_DATA_DIR) / relative;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

void expect_twins_close(const std::vector<torch::Tensor>& reference, const std::vector<torch::Tensor>& fused64,
                        const std::vector<torch::Tensor>& fused32, const std::vector<std::string>& names,
                        const TwinTolerances& tol) {
  ASSERT_EQ(fused64.size(), reference.size());
  ASSERT_EQ(fused32.size(), reference.size());
  ASSERT_EQ(names.size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    const double scale = tol.scale_atol ? 1.0 + reference[i].abs().max().item<double>() : 1.0;
    EXPECT_TRUE(assert_close(fused64[i], reference[i], tol.fp64_rtol, tol.fp64_atol * scale)) << names[i] << " fp64";
    EXPECT_TRUE(assert_close(fused32[i], reference[i], tol.fp32_rtol, tol.fp32_atol * scale)) << names[i] << " fp32";
  }
}

torch::Tensor seeded_randn(std::vector<int64_t> shape, uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, g, torch::kDouble);
}

}  // namespace seqmix::testing

#include "seqmix/models/dlinear.h"

#include <torch/torch.h>

#include "seqmix/io/error.h"

namespace seqmix {

torch::Tensor moving_average(const torch::Tensor& x, int64_t kernel) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) >= 1, "moving_average: x must have shape [B,L,C] with L >= 1 (got ", x.sizes(), ")");
  TORCH_CHECK(kernel >= 1 && kernel % 2 == 1, "moving_average: the kernel must be odd and positive (got ", kernel, ")");
  const int64_t pad = (kernel - 1) / 2, B = x.size(0), L = x.size(1), C = x.size(2);
  auto first = x.narrow(1, 0, 1).expand({B, pad, C});
  auto last = x.narrow(1, L - 1, 1).expand({B, pad, C});
  auto padded = torch::cat({first, x, last}, 1).transpose(1, 2);  // [B, C, L + kernel - 1]
  return torch::avg_pool1d(padded, {kernel}, {1}).transpose(1, 2);
}

DLinearImpl::DLinearImpl(int64_t input_len, int64_t horizon, int64_t features, int64_t kernel)
    : input_len_(input_len), horizon_(horizon), features_(features), kernel_(kernel) {
  if (input_len < 1 || horizon < 1 || features < 1)
    throw Error("model dlinear: input length, horizon and feature count must be positive");
  if (kernel < 1 || kernel % 2 == 0)
    throw Error("model dlinear: kernel must be odd and positive, got " + std::to_string(kernel));
  seasonal = register_module("seasonal", torch::nn::Linear(input_len, horizon));
  trend = register_module("trend", torch::nn::Linear(input_len, horizon));
}

torch::Tensor DLinearImpl::forward(const torch::Tensor& inputs) {
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(1) == input_len_ && inputs.size(2) == features_,
              "model dlinear: inputs must have shape [B, ", input_len_, ", ", features_, "] (got ", inputs.sizes(), ")");
  auto trend_part = moving_average(inputs, kernel_);
  auto seasonal_part = inputs - trend_part;
  // The Linears act over time: [B,C,L] -> [B,C,horizon].
  auto forecast = seasonal(seasonal_part.transpose(1, 2)) + trend(trend_part.transpose(1, 2));
  return forecast.transpose(1, 2);
}

std::vector<c10::SymInt> DLinearImpl::output_shape(c10::SymIntArrayRef inputs) const {
  return {inputs[0], c10::SymInt(horizon_), inputs[2]};  // [B,horizon,C]
}

}  // namespace seqmix

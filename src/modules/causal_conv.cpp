#include "seqmix/modules/causal_conv.h"

#include <torch/torch.h>

namespace seqmix {

CausalDepthwiseConvImpl::CausalDepthwiseConvImpl(int64_t channels, int64_t kernel_size, double init_std)
    : channels_(channels), kernel_size_(kernel_size) {
  TORCH_CHECK(kernel_size >= 1, "CausalDepthwiseConv: kernel size must be >= 1 (got ", kernel_size, ")");
  weight = register_parameter("weight", torch::randn({channels, kernel_size}) * init_std);
}

torch::Tensor CausalDepthwiseConvImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == channels_, "CausalDepthwiseConv: x must have shape [B,T,",
              channels_, "] (got ", x.sizes(), ")");
  auto xc = torch::constant_pad_nd(x.transpose(1, 2), {kernel_size_ - 1, 0});  // [B,C,T+K-1]
  const std::vector<int64_t> stride{1}, padding{0}, dilation{1};
  auto y = torch::conv1d(xc, weight.unsqueeze(1), torch::Tensor(), stride, padding, dilation, channels_);  // [B,C,T]
  return y.transpose(1, 2);
}

torch::Tensor CausalDepthwiseConvImpl::initial_window(int64_t batch) const {
  return torch::zeros({batch, kernel_size_ - 1, channels_}, weight.options());
}

torch::Tensor CausalDepthwiseConvImpl::step(const torch::Tensor& x_t, torch::Tensor& window) {
  auto full = torch::cat({window, x_t.unsqueeze(1)}, 1);  // [B,K,C], oldest first
  window = full.narrow(1, 1, kernel_size_ - 1);
  return (full * weight.t().unsqueeze(0)).sum(1);
}

}  // namespace seqmix

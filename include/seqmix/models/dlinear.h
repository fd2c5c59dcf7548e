#pragma once
// DLinear (Zeng et al. 2023, "Are transformers effective for time series forecasting?"): the input
// window is split by a moving average into a trend and a seasonal remainder, and each part is forecast
// by one Linear over time (input_len -> horizon) shared by every channel (the paper's individual=False);
// the forecast is their sum. Its Linears keep LibTorch's default initialisation, as DLinear's code does.
// No sequence mixer: it is a per-channel linear map of the window.
#include <torch/nn/modules/linear.h>

#include "seqmix/models/sequence_model.h"

namespace seqmix {

// The trend of x [B,L,C]: the mean over a centred window of `kernel` (odd) rows, the window padded by
// repeating the first and last rows (kernel - 1) / 2 times, as DLinear's moving_avg does. [B,L,C].
torch::Tensor moving_average(const torch::Tensor& x, int64_t kernel);

class DLinearImpl : public SequenceModelImpl {
 public:
  DLinearImpl(int64_t input_len, int64_t horizon, int64_t features, int64_t kernel = 25);
  torch::Tensor forward(const torch::Tensor& inputs) override;  // [B,input_len,C] -> [B,horizon,C]
  std::vector<c10::SymInt> output_shape(c10::SymIntArrayRef inputs) const override;

  torch::nn::Linear seasonal{nullptr}, trend{nullptr};  // weights [horizon, input_len]

 private:
  int64_t input_len_, horizon_, features_, kernel_;
};

}  // namespace seqmix

// The forecasting models: DLinear's moving average and decomposition against hand computations, the
// forecaster's shapes with several mixers and its instance normalisation, and their shape errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "seqmix/io/error.h"
#include "seqmix/models/dlinear.h"
#include "seqmix/models/forecaster.h"
#include "seqmix/models/model_factory.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

ModelContext forecasting_context(int64_t input_len, int64_t horizon, int64_t features, std::vector<MixerSpec> mixers) {
  ModelContext c;
  c.input_features = features;
  c.output_features = features;
  c.seq_len = input_len;
  c.output_len = horizon;
  c.mixers = std::move(mixers);
  return c;
}

TEST(TimeSeriesDLinear, MovingAverageRepeatsTheEdgeRows) {
  auto x = torch::tensor({1.0, 2.0, 3.0, 4.0, 10.0}, torch::kDouble).view({1, 5, 1});
  // kernel 3 pads to 1 | 1 2 3 4 10 | 10; kernel 5 to 1 1 | 1 2 3 4 10 | 10 10.
  EXPECT_CLOSE(moving_average(x, 3).flatten(), torch::tensor({4.0 / 3, 2.0, 3.0, 17.0 / 3, 8.0}, torch::kDouble), 1e-12, 0);
  EXPECT_CLOSE(moving_average(x, 5).flatten(), torch::tensor({1.6, 2.2, 4.0, 5.8, 7.4}, torch::kDouble), 1e-12, 0);
  EXPECT_TRUE(torch::equal(moving_average(x, 1), x));
}

TEST(TimeSeriesDLinear, MovingAverageOfKernel25MatchesAClampedWindowSum) {
  auto x = testing::seeded_randn({2, 96, 3}, 1);
  auto expected = torch::zeros_like(x);
  for (int64_t t = 0; t < 96; ++t) {
    for (int64_t j = t - 12; j <= t + 12; ++j) expected.select(1, t) += x.select(1, std::clamp<int64_t>(j, 0, 95));
    expected.select(1, t) /= 25.0;
  }
  EXPECT_CLOSE(moving_average(x, 25), expected, 1e-12, 1e-12);
}

TEST(TimeSeriesDLinear, ForecastIsTheSumOfTheTwoLinearsOverTime) {
  torch::manual_seed(0);
  DLinearImpl model(24, 6, 3, 5);
  testing::to_double(model);
  auto x = testing::seeded_randn({4, 24, 3}, 2);
  auto y = model.forward(x);
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{4, 6, 3}));
  auto trend = moving_average(x, 5);
  auto seasonal = x - trend;
  for (int64_t c = 0; c < 3; ++c) {  // one shared weight for every channel
    auto expected = torch::matmul(seasonal.select(2, c), model.seasonal->weight.t()) + model.seasonal->bias +
                    torch::matmul(trend.select(2, c), model.trend->weight.t()) + model.trend->bias;
    EXPECT_CLOSE(y.select(2, c), expected, 1e-12, 1e-12);
  }
  EXPECT_EQ(model.parameter_count(), 2 * (24 * 6 + 6));
}

TEST(TimeSeriesDLinear, BuiltWithoutMixersAndShapeChecked) {
  auto model = build_model("dlinear", forecasting_context(96, 192, 7, {}));
  EXPECT_EQ(model->forward(torch::randn({2, 96, 7})).sizes(), (at::IntArrayRef{2, 192, 7}));
  try {
    model->forward(torch::randn({2, 95, 7}));
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("model dlinear: inputs must have shape [B, 96, 7] (got [2, 95, 7])"),
              std::string::npos)
        << e.what_without_backtrace();
  }
  EXPECT_THROW(build_model("dlinear", forecasting_context(96, 96, 7, {"softmax"})), Error);
  EXPECT_THROW(build_model("dlinear:kernel=4", forecasting_context(96, 96, 7, {})), Error);
  ModelContext tokens;
  tokens.vocab_size = 16;
  tokens.seq_len = 8;
  EXPECT_THROW(build_model("dlinear", tokens), Error);
}

TEST(TimeSeriesForecaster, ForecastsEveryChannelWithEachCausalMixer) {
  for (const std::string mixer : {"softmax", "fem:prior=softmax", "fem:prior=gla", "gla", "linear"}) {
    SCOPED_TRACE(mixer);
    torch::manual_seed(0);
    auto model = build_model("forecaster:dim=16,layers=2", forecasting_context(24, 12, 7, {mixer}));
    auto x = torch::randn({3, 24, 7});
    auto y = model->forward(x);
    ASSERT_EQ(y.sizes(), (at::IntArrayRef{3, 12, 7}));
    EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
    y.square().mean().backward();
    for (const auto& p : model->parameters()) ASSERT_TRUE(p.grad().defined());
  }
}

// Instance normalisation: shifting every input value by c shifts every forecast by exactly c.
TEST(TimeSeriesForecaster, ShiftingTheInputsShiftsTheForecast) {
  torch::manual_seed(1);
  auto model = build_model("forecaster:dim=16,layers=2", forecasting_context(24, 12, 3, {"fem:prior=softmax"}));
  testing::to_double(*model);
  model->eval();
  auto x = testing::seeded_randn({2, 24, 3}, 3);
  auto y = model->forward(x);
  for (double c : {-4.0, 0.5, 100.0}) EXPECT_CLOSE(model->forward(x + c), y + c, 1e-9, 1e-9);

  auto plain = build_model("forecaster:dim=16,layers=2,instance_norm=0", forecasting_context(24, 12, 3, {"softmax"}));
  testing::to_double(*plain);
  EXPECT_FALSE(torch::allclose(plain->forward(x + 100.0), plain->forward(x) + 100.0));
}

TEST(TimeSeriesForecaster, ShapeAndContextErrors) {
  auto model = build_model("forecaster:dim=16,layers=1", forecasting_context(24, 12, 7, {"softmax"}));
  try {
    model->forward(torch::randn({2, 24, 6}));
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_NE(message.find("model forecaster: inputs must have shape [B, 24, 7] (got [2, 24, 6])"), std::string::npos)
        << message;
  }
  ModelContext tokens;
  tokens.vocab_size = 16;
  tokens.seq_len = 8;
  tokens.mixers = {"softmax"};
  try {
    build_model("forecaster", tokens);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "model forecaster forecasts the rows after its input window; it needs a forecasting task (e.g. ett)");
  }
  try {
    build_model("lm", forecasting_context(24, 12, 7, {"softmax"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "model lm emits one output per input position; a forecasting task needs model forecaster or dlinear");
  }
}

}  // namespace
}  // namespace seqmix

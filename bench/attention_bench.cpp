// Google Benchmark: the attention ops, forward, over (B, T, H, d).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "seqmix/ops/attention.h"

namespace {

void BM_softmax_attention_naive(benchmark::State& state) {
  const int64_t B = state.range(0), T = state.range(1), H = state.range(2), d = state.range(3);
  torch::NoGradGuard no_grad;
  auto q = torch::randn({B, T, H, d}), k = torch::randn({B, T, H, d}), v = torch::randn({B, T, H, d});
  for (auto _ : state) benchmark::DoNotOptimize(seqmix::ops::softmax_attention_naive(q, k, v, true, 0.125));
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_softmax_attention_naive)->Args({1, 256, 4, 64})->Args({4, 1024, 8, 64})->Unit(benchmark::kMillisecond);

}  // namespace

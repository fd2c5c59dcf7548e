// Google Benchmark: causal softmax attention, fused and naive, forward and forward+backward, over
// (B, T, H, dk, dv).
#include "op_bench.h"

namespace {

void BM_attention(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "attention", impl, backward);
}
void shapes(benchmark::internal::Benchmark* b) {
  seqmix::bench::timed(b)->Args({1, 256, 4, 64, 64})->Args({4, 1024, 8, 64, 64});
}
BENCHMARK_CAPTURE(BM_attention, fused_fwd, "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_attention, fused_fwdbwd, "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_attention, naive_fwd, "naive", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_attention, naive_fwdbwd, "naive", true)->Apply(shapes);

}  // namespace

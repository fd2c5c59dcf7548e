// Google Benchmark: the free-energy read of the softmax prior (mean and F together), fused and naive,
// forward and forward+backward, over (B, T, H, dk, dv).
#include "op_bench.h"

namespace {

void BM_fem_softmax_read(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "fem_softmax_read", impl, backward);
}
void shapes(benchmark::internal::Benchmark* b) {
  seqmix::bench::timed(b)->Args({1, 256, 4, 64, 64})->Args({4, 1024, 8, 64, 64});
}
// The naive op materialises [B,H,T,T,dv]: 8 GiB per tensor at the large shape, so it runs the small one.
void naive_shapes(benchmark::internal::Benchmark* b) { seqmix::bench::timed(b)->Args({1, 256, 4, 64, 64}); }
BENCHMARK_CAPTURE(BM_fem_softmax_read, fused_fwd, "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_fem_softmax_read, fused_fwdbwd, "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_fem_softmax_read, naive_fwd, "naive", false)->Apply(naive_shapes);
BENCHMARK_CAPTURE(BM_fem_softmax_read, naive_fwdbwd, "naive", true)->Apply(naive_shapes);

}  // namespace

// Google Benchmark: Exact Linear Attention, causal, fused (linear form) and naive (quadratic form), forward
// and forward+backward, with the Hadamard Exp kernel (`ela`) and the squared-Euclidean kernel
// (`ela_sum_sq`). The naive form holds [B,H,T,T,dk] for Hadamard Exp, so its shapes stay short.
#include "op_bench.h"

namespace {

void shapes(benchmark::internal::Benchmark* b) {
  seqmix::bench::timed(b)->Args({1, 256, 4, 64, 64})->Args({1, 4096, 8, 64, 64});
}
void naive_shapes(benchmark::internal::Benchmark* b) { seqmix::bench::timed(b)->Args({1, 256, 4, 64, 64}); }

void BM_ela(benchmark::State& state, const char* op, const char* impl, bool backward) {
  seqmix::bench::run_op(state, op, impl, backward);
}
BENCHMARK_CAPTURE(BM_ela, hadamard_fused_fwd, "ela", "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_ela, hadamard_fused_fwdbwd, "ela", "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_ela, hadamard_naive_fwd, "ela", "naive", false)->Apply(naive_shapes);
BENCHMARK_CAPTURE(BM_ela, hadamard_naive_fwdbwd, "ela", "naive", true)->Apply(naive_shapes);
BENCHMARK_CAPTURE(BM_ela, sum_sq_fused_fwd, "ela_sum_sq", "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_ela, sum_sq_fused_fwdbwd, "ela_sum_sq", "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_ela, sum_sq_naive_fwd, "ela_sum_sq", "naive", false)->Apply(naive_shapes);
BENCHMARK_CAPTURE(BM_ela, sum_sq_naive_fwdbwd, "ela_sum_sq", "naive", true)->Apply(naive_shapes);

}  // namespace

// Google Benchmark: the linear-prior scans (linear attention, GLA, AFT, LRNN-decay, the selective SSM),
// fused and naive, forward and forward+backward, over (B, T, H, dk, dv). AFT and the SSM run on C = H*dv
// channels (the SSM with N = dk = 16 states, Mamba's); AFT and LRNN-decay ignore dk.
#include "op_bench.h"

namespace {

void shapes(benchmark::internal::Benchmark* b) {
  seqmix::bench::timed(b)->Args({1, 256, 4, 64, 64})->Args({4, 1024, 8, 64, 64});
}
void ssm_shapes(benchmark::internal::Benchmark* b) {
  seqmix::bench::timed(b)->Args({1, 256, 4, 16, 64})->Args({4, 1024, 8, 16, 64});
}

void BM_linear_attention(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "linear_attention", impl, backward);
}
BENCHMARK_CAPTURE(BM_linear_attention, fused_fwd, "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_linear_attention, fused_fwdbwd, "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_linear_attention, naive_fwd, "naive", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_linear_attention, naive_fwdbwd, "naive", true)->Apply(shapes);

void BM_gla(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "gla", impl, backward);
}
BENCHMARK_CAPTURE(BM_gla, fused_fwd, "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_gla, fused_fwdbwd, "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_gla, naive_fwd, "naive", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_gla, naive_fwdbwd, "naive", true)->Apply(shapes);

void BM_aft(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "aft", impl, backward);
}
BENCHMARK_CAPTURE(BM_aft, fused_fwd, "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_aft, fused_fwdbwd, "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_aft, naive_fwd, "naive", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_aft, naive_fwdbwd, "naive", true)->Apply(shapes);

void BM_lrnn_decay(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "lrnn_decay", impl, backward);
}
BENCHMARK_CAPTURE(BM_lrnn_decay, fused_fwd, "fused", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_lrnn_decay, fused_fwdbwd, "fused", true)->Apply(shapes);
BENCHMARK_CAPTURE(BM_lrnn_decay, naive_fwd, "naive", false)->Apply(shapes);
BENCHMARK_CAPTURE(BM_lrnn_decay, naive_fwdbwd, "naive", true)->Apply(shapes);

void BM_ssm(benchmark::State& state, const char* impl, bool backward) {
  seqmix::bench::run_op(state, "ssm", impl, backward);
}
BENCHMARK_CAPTURE(BM_ssm, fused_fwd, "fused", false)->Apply(ssm_shapes);
BENCHMARK_CAPTURE(BM_ssm, fused_fwdbwd, "fused", true)->Apply(ssm_shapes);
BENCHMARK_CAPTURE(BM_ssm, naive_fwd, "naive", false)->Apply(ssm_shapes);
BENCHMARK_CAPTURE(BM_ssm, naive_fwdbwd, "naive", true)->Apply(ssm_shapes);

}  // namespace

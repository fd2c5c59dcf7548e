#pragma once
// Shared by bench/*_bench.cpp: one op of seqmix's benchmark table (the inputs `seqmix bench --op` uses),
// forward (no autograd) or forward+backward of a fixed random upstream gradient. Args: B, T, H, dk, dv.
#include <benchmark/benchmark.h>

#include <string>

#include "seqmix/train/benchmark.h"

namespace seqmix::bench {

inline void run_op(benchmark::State& state, const std::string& op, const std::string& impl, bool backward) {
  const OpShape shape{state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
  BenchCase bench_case = make_op_case(op, impl, shape);
  for (auto _ : state) {
    if (backward)
      bench_case.forward_backward();
    else
      benchmark::DoNotOptimize(bench_case.forward());
  }
  state.SetItemsProcessed(state.iterations() * shape.batch * shape.length);
}

// Wall-clock time (the ops run on ATen's thread pool), in milliseconds.
inline benchmark::internal::Benchmark* timed(benchmark::internal::Benchmark* b) {
  return b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace seqmix::bench

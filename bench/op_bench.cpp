// Google Benchmark over the op table: every benchmark case of every op family (the inputs `seqmix bench --op`
// uses), each implementation it has, forward (no autograd) and forward+backward of a fixed random upstream
// gradient, at the shapes its declaration names (B, T, H, dk, dv). Wall-clock time: the ops run on ATen's
// thread pool. Filter with --benchmark_filter, e.g. --benchmark_filter=gla/fused.
#include <benchmark/benchmark.h>

#include "seqmix/ops/op_table.h"
#include "seqmix/train/benchmark.h"

namespace {

void run_op(benchmark::State& state, const std::string& op, const std::string& impl, bool backward) {
  const seqmix::OpShape shape{state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
  seqmix::BenchCase bench_case = seqmix::make_op_case(op, impl, shape);
  for (auto _ : state) {
    if (backward)
      bench_case.forward_backward();
    else
      benchmark::DoNotOptimize(bench_case.forward());
  }
  state.SetItemsProcessed(state.iterations() * shape.batch * shape.length);
}

// BM_<case>/<impl>_<fwd|fwdbwd>/B/T/H/dk/dv for every case, impl and pass.
void register_op_benchmarks() {
  for (const auto* c : seqmix::ops::bench_cases())
    for (const auto impl : c->impls.list()) {
      const std::string impl_name = seqmix::ops::impl_name(impl);
      const auto& shapes = impl == seqmix::ops::Impl::naive && !c->naive_shapes.empty() ? c->naive_shapes : c->shapes;
      for (const bool backward : {false, true}) {
        auto* b = benchmark::RegisterBenchmark(
            ("BM_" + c->name + "/" + impl_name + (backward ? "_fwdbwd" : "_fwd")).c_str(),
            [name = c->name, impl_name, backward](benchmark::State& state) { run_op(state, name, impl_name, backward); });
        b->UseRealTime()->Unit(benchmark::kMillisecond);
        for (const auto& s : shapes) b->Args({s.batch, s.length, s.heads, s.dk, s.dv});
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  register_op_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

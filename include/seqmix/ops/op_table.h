#pragma once
// The op table. Every op family (a folder src/ops/<family>/) declares itself once, in its declare.cpp: its
// PyTorch operators (torch.ops.seqmix.<op>, with their schemas), the implementations its entry point has, the
// benchmark cases `seqmix bench --op` and bench/ time, and the calls with bad arguments that must fail with
// one clear line. Everything that lists ops reads this table: the benchmarks, the bad-argument sweep
// (tests/ops/bad_shapes_test.cpp), and from Python (seqmix.op_table()) the wrappers' coverage guard and the
// op tests. docs/contributing.md says how to add a family.
#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "seqmix/ops/impl.h"

namespace seqmix::ops {

// The sizes of a benchmark case: B, T, H, dk, dv (ops on [B,T,C] channels use C = H*dv).
struct OpShape {
  int64_t batch = 1, length = 1, heads = 1, dk = 1, dv = 1;
};

// A benchmark case's inputs, made once: `run` computes the outputs from them, `leaves` are the inputs that
// take gradients.
struct OpCase {
  std::function<std::vector<at::Tensor>()> run;
  std::vector<at::Tensor> leaves;
};

struct BenchCaseDeclaration {
  std::string name;    // `seqmix bench --op <name>`
  int order = 0;       // position in listings (seqmix bench's list of ops), ascending
  std::string inputs;  // what it runs on, one line (docs/cli.md's table)
  ImplSet impls{};
  // The inputs at `shape` (the caller seeds the generator) and the implementation `impl` on them.
  std::function<OpCase(Impl impl, const OpShape& shape)> make;
  // Model flops of one forward where a standard count exists, else nullopt.
  std::function<std::optional<double>(const OpShape& shape)> forward_flops = [](const OpShape&) {
    return std::optional<double>();
  };
  // The shapes bench/ (Google Benchmark) times, and the smaller ones for the naive twin (none: the same).
  std::vector<OpShape> shapes = {{1, 256, 4, 64, 64}, {4, 1024, 8, 64, 64}};
  std::vector<OpShape> naive_shapes = {};
};

// One call with bad arguments: what is wrong, the call, and a text its one-line message must contain.
struct BadCall {
  std::string name;
  std::function<void()> call;
  std::string expected;
};

// One operator torch.ops.seqmix.<name>, as its define_op registers it (src/ops/common/torch_op.h).
struct TorchOpDeclaration {
  std::string name;
  ImplSet impls{};  // for operators with an `impl` argument; empty otherwise
};
// Lists operator `op` in the op table under `family`, in definition order; define_op and
// define_op_without_tensors call it, so no family writes its operators' names.
void list_operator(const std::string& family, TorchOpDeclaration op);

struct OpFamily {
  std::string name;  // its folder, src/ops/<name>
  std::vector<TorchOpDeclaration> torch_ops;  // filled by op_families() from the operators its folder defines
  std::vector<BenchCaseDeclaration> bench_cases;
  std::function<std::vector<BadCall>()> bad_calls;
};

// Every family, by name; the bench cases of all families, by order. Complete once static initialisation is
// over (every family registers itself at start-up).
const std::vector<OpFamily>& op_families();
std::vector<const BenchCaseDeclaration*> bench_cases();
// The bench case `name`; throws seqmix::Error listing the valid names.
const BenchCaseDeclaration& bench_case(const std::string& name);
// The table as JSON, for Python: {"families": [{"name", "torch_ops": [{"name", "impls", "impls_on", "auto_on",
// "fused_kernels": [{"name", "devices", "passed_on_gpu"}], "doc"}], "bench_cases"}]}, the devices as the dispatcher
// has them.
std::string op_table_json();

// Adds a family to the table; declare.cpp's SEQMIX_OP_FAMILY does it at start-up.
struct OpFamilyRegistration {
  explicit OpFamilyRegistration(OpFamily (*declare)());
};
#define SEQMIX_OP_FAMILY(declare) \
  static const ::seqmix::ops::OpFamilyRegistration seqmix_op_family_registration_##declare(&declare)

}  // namespace seqmix::ops

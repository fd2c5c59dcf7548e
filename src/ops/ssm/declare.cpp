// The ssm family in the op table and in torch.ops.seqmix: the diagonal selective scan (fused or naive), its
// decode step, and the FEM read through it.
#include "../common/bench_inputs.h"
#include "../common/torch_op.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/op_table.h"
#include "seqmix/ops/ssm.h"
#include "internal.h"

namespace seqmix::ops {

std::vector<BadCall> ssm_bad_calls();

namespace {

// The FEM read under the selective-SSM prior, per channel: the prior's weights are the scan's impulse
// response, normalised by the scan of ones (plus the skip D u in both), as the FEM layer's SSM prior reads
// real tokens (this op has no padding mask). v, delta [B,T,C], A [C,N], b, c [B,T,N], beta [C], D [C] (optional).
TensorPair fem_ssm_read_op(const FemSsmReadCall& call) {
  const at::Tensor& v = call.v;
  TORCH_CHECK(v.dim() == 3, "fem_ssm_read: v must be [B,T,C] (got ", v.sizes(), ")");
  const Impl chosen = check_impl(impl_of(call.impl), kSsmScanImpls, "fem_ssm_read", v.device());
  const SsmPriorParameters prior{call.delta, call.A, call.b, call.c, or_undefined(call.D), {}};
  const FemRead r = fem_capped_read("fem_ssm_read", v, call.beta, call.cap, [&](const at::Tensor& values) {
    // [B,T,2C] as one group of two streams [B,T,1,2,C]: both read through one scan with the stream of ones.
    const auto streams = values.view({values.size(0), values.size(1), 1, 2, v.size(-1)});
    return ssm_normalised_read_in_operator(streams, prior, kPriorNormaliserFloor, chosen,
                                           or_undefined(call.cu_seqlens))
        .view(values.sizes());
  });
  return {r.mean, r.free_energy};
}

// Channels C = H*dv, states N = dk: u [B,T,C], delta > 0 [B,T,C], A < 0 [C,N], b, c >= 0 [B,T,N].
OpCase ssm_case(Impl impl, const OpShape& s) {
  using bench_inputs::leaf;
  const int64_t channels = s.heads * s.dv;
  const auto u = leaf(at::randn({s.batch, s.length, channels}));
  const auto delta = leaf(at::softplus(at::randn({s.batch, s.length, channels})));
  const auto A = leaf(-at::exp(0.5 * at::randn({channels, s.dk})));
  const auto b = leaf(at::rand({s.batch, s.length, s.dk}));
  const auto c = leaf(at::rand({s.batch, s.length, s.dk}));
  return {[=] { return std::vector<at::Tensor>{ssm_scan(u, delta, A, b, c, {.impl = impl}).y}; }, {u, delta, A, b, c}};
}

OpFamily declare_ssm() {
  const BenchCaseDeclaration scan{
      .name = "ssm",
      .order = 70,
      .inputs = "u, delta = softplus(randn) [B,T,C], C = H*dv; A = -exp(randn/2) [C,N], N = dk; b, c = rand [B,T,N]",
      .impls = kSsmScanImpls,
      .make = ssm_case,
      .shapes = {{1, 256, 4, 16, 64}, {4, 1024, 8, 16, 64}}};  // N = dk = 16 states, Mamba's
  return {.name = "ssm",
          .bench_cases = {scan},
          .bad_calls = ssm_bad_calls};
}

}  // namespace

SEQMIX_OP_FAMILY(declare_ssm);

}  // namespace seqmix::ops

TORCH_LIBRARY_FRAGMENT(seqmix, m) {
  using namespace seqmix::ops;
  define_op<&ssm_scan_op>(m, "ssm_scan(Tensor u, Tensor delta, Tensor A, Tensor b, Tensor c, str impl='auto', "
                             "Tensor? state=None, bool output_final_state=False, Tensor? cu_seqlens=None) "
                             "-> (Tensor y, Tensor state)",
      R"doc(Diagonal selective scan: h_t = exp(delta_t A) h_{t-1} + delta_t b_t u_t, y_t = sum_n c_t[n] h_t[:, n].
u, delta [B,T,C], A [C,N] < 0, b, c [B,T,N] -> y [B,T,C]. initial_state h_0 [B,C,N] continues the scan;
output_final_state=True returns (y, h_T). cu_seqlens (int64 [N+1]) packs N sequences into [1, total_T, ...],
each scanned from zero (or its own row of initial_state, [N,C,N_state]).)doc", kSsmScanImpls);
  define_op<&ssm_step_op>(m, "ssm_step(Tensor u_t, Tensor delta_t, Tensor A, Tensor b_t, Tensor c_t, Tensor state) "
                             "-> (Tensor y, Tensor state)",
      R"doc(One scan step: u_t, delta_t [B,C], A [C,N], b_t, c_t [B,N], state [B,C,N] -> (y_t [B,C], state).)doc");
  define_op<&fem_ssm_read_op>(m, "fem_ssm_read(Tensor v, Tensor delta, Tensor A, Tensor b, Tensor c, Tensor beta, "
                                 "Tensor? D=None, float cap=40., str impl='auto', Tensor? cu_seqlens=None) "
                                 "-> (Tensor mean, Tensor free_energy)",
      R"doc(The FEM read under the selective-SSM prior, per channel: weights are the scan's impulse response,
normalised by the scan of ones (with the skip D u in both, as the FEM layer reads it).
v, delta [B,T,C], A [C,N] < 0, b, c [B,T,N] >= 0, D [C], beta [C] -> (mean, free_energy) [B,T,C].
cu_seqlens packs sequences as in ssm_scan.)doc", kSsmScanImpls);
}

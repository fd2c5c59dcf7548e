#pragma once
// Exact Linear Attention (ELA): row-normalised attention under a kernel with an exact finite feature
// decomposition k(q, k') = phi(q) . psi(k'), so
//   y_t = phi(q_t) S_t / phi(q_t) . z_t,   S_t = sum_j psi(k_j) (x) v_j,   z_t = sum_j psi(k_j),
// with j over every position (bidirectional) or j <= t (causal). Exact: it equals the quadratic form
// sum_j k(q_t, k_j) v_j / sum_j k(q_t, k_j). Shapes: q, k [B,T,H,dk], v [B,T,H,dv]; outputs [B,T,H,dv].
// Derivations in src/ops/ela/README.md.
#include <ATen/core/Tensor.h>

#include "seqmix/ops/impl.h"
#include "seqmix/ops/operators.h"

#include <functional>
#include <string>
#include <vector>

namespace seqmix::ops {

using FeatureFn = std::function<at::Tensor(const at::Tensor&)>;  // [..., dk] -> [..., features]

// A kernel given by its two feature maps. The Hadamard Exp kernel sum_d exp(q_d) exp(k_d) is marked
// `exponential`: its features exp(q), exp(k) are formed inside the ops with shifts that cancel exactly
// (query_features and key_features are empty for it).
struct ExactKernel {
  std::string name;
  std::string description;
  FeatureFn query_features, key_features;
  bool exponential = false;
  bool builtin = true;  // user kernels are checked at run time for a negative row sum
};

// Built-in: hadamard_exp, sum_sq_euclidean (||q+k||^2), sub_sq_euclidean (||q-k||^2),
// direction_magnitude (1 + ||q|| ||k|| (1 + cos), the non-negative custom kernel), plus any registered.
const ExactKernel& exact_kernel(const std::string& name);  // throws, listing the names, when unknown
std::vector<std::string> exact_kernel_names();
// Adds a user-defined kernel (both feature maps must be given, the name must be new). The kernel must be
// non-negative; the ops check each row sum and refuse a negative one.
void register_exact_kernel(const std::string& name, const std::string& description, FeatureFn query_features,
                           FeatureFn key_features);

// Refuses a user kernel's negative or NaN row sums (built-in kernels are non-negative by construction).
void check_row_sums(const ExactKernel& kernel, const at::Tensor& row_sums);

// k(q_t, k_j) for every pair, [B,H,T,S] (for inspection and tests; q [B,T,H,dk], k [B,S,H,dk]).
// For hadamard_exp it is returned as log k (the kernel itself overflows for large inputs).
at::Tensor ela_kernel_matrix(const at::Tensor& q, const at::Tensor& k, const ExactKernel& kernel);

// The explicit attention weights w_tj = k(q_t, k_j) / sum_j' k(q_t, k_j') [B,H,T,T] (zero above the
// diagonal when causal): the quadratic form, for inspection. Row sums are floored at eps.
at::Tensor ela_attention_weights(const at::Tensor& q, const at::Tensor& k, const ExactKernel& kernel, bool causal,
                                 double eps = 1e-8);

// Naive twin: ela_attention_weights(q, k) applied to v (O(T^2) memory).
at::Tensor ela_naive(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ExactKernel& kernel,
                     bool causal, double eps = 1e-8);

// The linear form, O(T) time and O(T d) memory, no T x T tensor. Causal hadamard_exp runs a fused scan
// with the causal running max of each key channel (src/ops/ela/fused.cpp, hand-written backward); the
// other kernels run linear attention's chunked scan on their features. Same outputs and gradients as
// ela_naive.
at::Tensor ela_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ExactKernel& kernel,
                     bool causal, double eps = 1e-8);

// Fixed-size decode state per (batch, head): kv [B,H,F,dv], k_sum [B,H,F] and, for hadamard_exp, the
// running max of each key channel key_max [B,H,dk] (kv and k_sum are then relative to it). F is the
// feature width; nothing grows with T.
struct ElaState {
  at::Tensor kv, k_sum, key_max;
};
// (A fresh state: ops::ela_initial_state, operators.h, whose key_max is empty, [0], for the other kernels.)

// State handoff for the causal read (flash-linear-attention's initial_state / output_final_state): y of positions
// 1..T when `initial` (kv and k_sum, plus key_max for hadamard_exp; all undefined = a fresh state) already holds
// the positions before them, and, when `final_state`, the state after position T (ela_step's layout; else left
// undefined). `zero_state` is y from a fresh state by either impl. Exact: the zero-start row sum D0 is rebuilt
// in O(T d) (hadamard_exp: logcumsumexp of the keys) and y = (D0 y0 + phi S) / (D0 + phi . z), stabilised as
// the kernels are (derivation in src/ops/ela/README.md). Autograd through ATen (src/ops/ela/state.cpp).
struct ElaReadWithState {
  at::Tensor y;
  ElaState final_state;
};
ElaReadWithState continue_ela_scan(const at::Tensor& zero_state, const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, const ExactKernel& kernel, double eps,
                                   const ElaState& initial, bool final_state);

// The implementations of torch.ops.seqmix.ela (which finds the kernel by its registered name), whose C++ entry
// points ops::ela and ops::ela_step (operators.h) are generated from their schemas: fused (the linear form) or naive
// (the explicit quadratic form).
constexpr ImplSet kElaImpls{{Impl::fused, Impl::naive}, {"seqmix::_ela_hadamard_forward", "seqmix::_gla_forward"}};

}  // namespace seqmix::ops

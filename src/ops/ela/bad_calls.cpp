// ela's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/ela.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> ela_bad_calls() {
  torch::manual_seed(5);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const ops::ExactKernel hadamard = ops::exact_kernel("hadamard_exp");
  const ops::ExactKernel poly = ops::exact_kernel("sum_sq_euclidean");
  ops::ExactKernel user;  // a user kernel, so its row sums are checked
  user.name = "bad_shapes_user_kernel";
  user.query_features = user.key_features = [](const torch::Tensor& x) { return x; };
  user.builtin = false;
  const ops::FeatureFn identity = [](const torch::Tensor& x) { return x; };
  std::vector<BadCall> cases;

  cases.push_back({"exact_kernel: unknown name", [] { ops::exact_kernel("no_such_kernel"); }, "no_such_kernel"});
  cases.push_back({"exact_kernel: empty name", [] { ops::exact_kernel(""); }, "unknown ELA kernel"});

  const std::string rk = "register_exact_kernel";
  cases.push_back({rk + ": empty name", [=] { ops::register_exact_kernel("", "", identity, identity); }, rk});
  cases.push_back({rk + ": no key feature map",
                   [=] { ops::register_exact_kernel("bad_shapes_no_key_map", "", identity, nullptr); }, rk});
  cases.push_back({rk + ": the name of a built-in kernel",
                   [=] { ops::register_exact_kernel("hadamard_exp", "", identity, identity); }, "hadamard_exp"});

  cases.push_back({"check_row_sums: a negative row sum",
                   [=] { ops::check_row_sums(user, torch::tensor({1.0, -1.0}, kF64)); }, user.name});
  cases.push_back({"check_row_sums: a NaN row sum",
                   [=] { ops::check_row_sums(user, torch::tensor({1.0, kNaN}, kF64)); }, user.name});

  const std::string km = "ela_kernel_matrix";
  cases.push_back({km + ": q of rank 3", [=] { ops::ela_kernel_matrix(q.flatten(2), k, poly); }, km});
  cases.push_back({km + ": k with another head width", [=] { ops::ela_kernel_matrix(q, rnd({kB, kT, kH, kDk + 1}), hadamard); }, km});
  cases.push_back({km + ": k with another head count", [=] { ops::ela_kernel_matrix(q, rnd({kB, kT, kH + 1, kDk}), poly); }, km});
  cases.push_back({km + ": k with another batch size", [=] { ops::ela_kernel_matrix(q, rnd({kB + 1, kT, kH, kDk}), poly); }, km});
  cases.push_back({km + ": mixed dtypes", [=] { ops::ela_kernel_matrix(q, k.to(torch::kFloat), poly); }, km});

  const std::string aw = "ela_attention_weights";
  cases.push_back({aw + ": q of rank 3", [=] { ops::ela_attention_weights(q.flatten(2), k, poly, true); }, aw});
  cases.push_back({aw + ": k of rank 3", [=] { ops::ela_attention_weights(q, k.flatten(2), poly, true); }, aw});
  cases.push_back({aw + ": k of another length", [=] { ops::ela_attention_weights(q, rnd({kB, kT + 1, kH, kDk}), hadamard, false); }, aw});
  cases.push_back({aw + ": mixed dtypes", [=] { ops::ela_attention_weights(q, k.to(torch::kFloat), poly, true); }, aw});
  cases.push_back({aw + ": negative eps", [=] { ops::ela_attention_weights(q, k, poly, true, -1.0); }, "eps"});

  const std::string en = "ela_naive";
  cases.push_back({en + ": q of rank 3", [=] { ops::ela_naive(q.flatten(2), k, v, poly, true); }, en});
  cases.push_back({en + ": k with another head width", [=] { ops::ela_naive(q, rnd({kB, kT, kH, kDk + 1}), v, poly, true); }, en});
  cases.push_back({en + ": v with another head count", [=] { ops::ela_naive(q, k, rnd({kB, kT, kH + 1, kDv}), hadamard, false); }, en});
  cases.push_back({en + ": mixed dtypes", [=] { ops::ela_naive(q, k, v.to(torch::kFloat), hadamard, true); }, en});
  cases.push_back({en + ": negative eps", [=] { ops::ela_naive(q, k, v, poly, true, -1.0); }, "eps"});

  const std::string ef = "ela_fused";
  cases.push_back({ef + ": q of rank 3", [=] { ops::ela_fused(q.flatten(2), k, v, hadamard, true); }, ef});
  cases.push_back({ef + ": k with another head width", [=] { ops::ela_fused(q, rnd({kB, kT, kH, kDk + 1}), v, hadamard, false); }, ef});
  cases.push_back({ef + ": v of another length", [=] { ops::ela_fused(q, k, rnd({kB, kT + 1, kH, kDv}), poly, true); }, ef});
  cases.push_back({ef + ": mixed dtypes", [=] { ops::ela_fused(q.to(torch::kFloat), k, v, poly, true); }, ef});
  cases.push_back({ef + ": float16", [=] {
                     ops::ela_fused(q.to(torch::kHalf), k.to(torch::kHalf), v.to(torch::kHalf), hadamard, true);
                   }, ef});
  cases.push_back({ef + ": negative eps", [=] { ops::ela_fused(q, k, v, poly, true, -1.0); }, "eps"});

  const std::string ei = "ela_initial_state";
  cases.push_back({ei + ": negative batch size", [=] { ops::ela_initial_state(-1, kH, kDk, kDv, {.kernel = poly.name, .dtype = torch::kDouble}); }, ei});
  cases.push_back({ei + ": negative head width", [=] { ops::ela_initial_state(kB, kH, -1, kDv, {.kernel = hadamard.name, .dtype = torch::kDouble}); }, ei});
  cases.push_back({ei + ": integer dtype", [=] {
                     ops::ela_initial_state(kB, kH, kDk, kDv, {.kernel = poly.name, .dtype = torch::kLong});
                   }, ei});

  const std::string es = "ela_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  // The op's decode state (ops::ela_initial_state), float64.
  const ops::ElaInitialStateArgs hadamard_state{.kernel = hadamard.name, .dtype = torch::kDouble};
  const ops::ElaInitialStateArgs poly_state{.kernel = poly.name, .dtype = torch::kDouble};
  cases.push_back({es + ": q_t of rank 4", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, hadamard_state);
                     ops::ela_step(q_t.unsqueeze(1), k_t, v_t, state.kv, state.k_sum, state.key_max,
                                   {.kernel = hadamard.name});
                   }, es});
  cases.push_back({es + ": state.kv of rank 3", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly_state);
                     state.kv = state.kv.flatten(2);
                     ops::ela_step(q_t, k_t, v_t, state.kv, state.k_sum, state.key_max,
                                   {.kernel = poly.name});
                   }, es});
  cases.push_back({es + ": k_t with another head width", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, hadamard_state);
                     ops::ela_step(q_t, rnd({kB, kH, kDk + 1}), v_t, state.kv, state.k_sum, state.key_max,
                                   {.kernel = hadamard.name});
                   }, es});
  cases.push_back({es + ": v_t with another value width", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly_state);
                     ops::ela_step(q_t, k_t, rnd({kB, kH, kDv + 1}), state.kv, state.k_sum, state.key_max,
                                   {.kernel = poly.name});
                   }, es});
  cases.push_back({es + ": the state of another kernel", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly_state);
                     ops::ela_step(q_t, k_t, v_t, state.kv, state.k_sum, state.key_max,
                                   {.kernel = hadamard.name});
                   }, es});
  cases.push_back({es + ": negative eps", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly_state);
                     ops::ela_step(q_t, k_t, v_t, state.kv, state.k_sum, state.key_max,
                                   {.kernel = poly.name, .eps = -1.0});
                   }, "eps"});

  return cases;
}

}  // namespace seqmix::ops

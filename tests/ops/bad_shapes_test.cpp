// Every public op of include/seqmix/ops/ called with bad arguments (wrong rank, mismatched sizes, mixed dtypes,
// bad option values, unknown names) throws a one-line error naming the op or the argument.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "seqmix/io/error.h"
#include "seqmix/ops/aft.h"
#include "seqmix/ops/attention.h"
#include "seqmix/ops/ela.h"
#include "seqmix/ops/fem.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/hypermlp.h"
#include "seqmix/ops/impl.h"
#include "seqmix/ops/linear_attention.h"
#include "seqmix/ops/prior_read.h"
#include "seqmix/ops/second_order_attention.h"
#include "seqmix/ops/ssm.h"

namespace seqmix {
namespace {

// One bad call: what is wrong with it, the call, and a substring its message must contain (the op or the
// argument).
struct BadCall {
  std::string name;
  std::function<void()> call;
  std::string expected;
};

// The call must throw seqmix::Error, or LibTorch's c10::Error (TORCH_CHECK: a RuntimeError from Python),
// whose message (without LibTorch's backtrace) is one line that contains expected_substring: never
// another exception, a crash or a silent result.
void expect_message(const std::string& message, const std::string& expected_substring) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << "the message spans several lines: " << message;
  EXPECT_NE(message.find(expected_substring), std::string::npos)
      << "the message does not name '" << expected_substring << "': " << message;
}

void expect_clear_error(const std::function<void()>& call, const std::string& expected_substring) {
  try {
    call();
  } catch (const Error& e) {
    expect_message(e.what(), expected_substring);
    return;
  } catch (const c10::Error& e) {
    expect_message(e.what_without_backtrace(), expected_substring);
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw an exception that is neither seqmix::Error nor c10::Error: " << e.what();
    return;
  }
  ADD_FAILURE() << "no error (expected one naming '" << expected_substring << "')";
}

void expect_clear_errors(const std::vector<BadCall>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    expect_clear_error(c.call, c.expected);
  }
}

constexpr int64_t kB = 2, kT = 5, kH = 2, kDk = 4, kDv = 3, kC = 3, kN = 4;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const torch::Device kCpu(torch::kCPU);
const auto kF64 = torch::TensorOptions().dtype(torch::kDouble);

torch::Tensor rnd(std::vector<int64_t> shape) { return torch::randn(shape, kF64); }
torch::Tensor positive(std::vector<int64_t> shape) { return torch::rand(shape, kF64) + 0.5; }
torch::Tensor all_true(std::vector<int64_t> shape) { return torch::ones(shape, torch::kBool); }

TEST(BadShapes, Attention) {
  torch::manual_seed(0);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto mask = all_true({kB, kT});
  const double scale = 0.5;
  std::vector<BadCall> cases;

  const std::string sn = "softmax_attention_naive";
  cases.push_back({sn + ": q of rank 3", [=] { ops::softmax_attention_naive(q.flatten(2), k, v, true, scale); }, sn});
  cases.push_back({sn + ": k with another batch size",
                   [=] { ops::softmax_attention_naive(q, rnd({kB + 1, kT, kH, kDk}), v, true, scale); }, sn});
  cases.push_back({sn + ": v with another head count",
                   [=] { ops::softmax_attention_naive(q, k, rnd({kB, kT, kH + 1, kDv}), true, scale); }, sn});
  cases.push_back({sn + ": k with another head width",
                   [=] { ops::softmax_attention_naive(q, rnd({kB, kT, kH, kDk + 1}), v, true, scale); }, sn});
  cases.push_back({sn + ": v with another key length",
                   [=] { ops::softmax_attention_naive(q, k, rnd({kB, kT + 1, kH, kDv}), true, scale); }, sn});
  cases.push_back({sn + ": more queries than keys",
                   [=] { ops::softmax_attention_naive(rnd({kB, kT + 1, kH, kDk}), k, v, true, scale); }, sn});
  cases.push_back({sn + ": mixed dtypes",
                   [=] { ops::softmax_attention_naive(q, k, v.to(torch::kFloat), true, scale); }, sn});
  cases.push_back({sn + ": key_mask of another length",
                   [=] { ops::softmax_attention_naive(q, k, v, true, scale, all_true({kB, kT + 1})); }, "key_mask"});
  cases.push_back({sn + ": key_mask of another batch size",
                   [=] { ops::softmax_attention_naive(q, k, v, true, scale, all_true({kB + 1, kT})); }, "key_mask"});
  cases.push_back({sn + ": float key_mask",
                   [=] { ops::softmax_attention_naive(q, k, v, true, scale, torch::ones({kB, kT})); }, "key_mask"});
  cases.push_back({sn + ": non-finite scale", [=] { ops::softmax_attention_naive(q, k, v, true, kNaN); }, "scale"});

  const std::string rn = "relu_attention_naive";
  cases.push_back({rn + ": q of rank 3", [=] { ops::relu_attention_naive(q.flatten(2), k, v, true, 1e-6); }, rn});
  cases.push_back({rn + ": k with another head width",
                   [=] { ops::relu_attention_naive(q, rnd({kB, kT, kH, kDk + 1}), v, true, 1e-6); }, rn});
  cases.push_back({rn + ": v with another key length",
                   [=] { ops::relu_attention_naive(q, k, rnd({kB, kT + 1, kH, kDv}), true, 1e-6); }, rn});
  cases.push_back({rn + ": more queries than keys",
                   [=] { ops::relu_attention_naive(rnd({kB, kT + 1, kH, kDk}), k, v, true, 1e-6); }, rn});
  cases.push_back({rn + ": mixed dtypes", [=] { ops::relu_attention_naive(q.to(torch::kFloat), k, v, true, 1e-6); }, rn});
  cases.push_back({rn + ": negative eps", [=] { ops::relu_attention_naive(q, k, v, true, -1.0); }, "eps"});

  const std::string sf = "softmax_attention_fused";
  cases.push_back({sf + ": q of rank 3", [=] { ops::softmax_attention_fused(q.flatten(2), k, v, true, scale); }, sf});
  cases.push_back({sf + ": v with another head count",
                   [=] { ops::softmax_attention_fused(q, k, rnd({kB, kT, kH + 1, kDv}), true, scale); }, sf});
  cases.push_back({sf + ": k with another batch size",
                   [=] { ops::softmax_attention_fused(q, rnd({kB + 1, kT, kH, kDk}), v, true, scale); }, sf});
  cases.push_back({sf + ": mixed dtypes", [=] { ops::softmax_attention_fused(q, k.to(torch::kFloat), v, true, scale); }, sf});
  cases.push_back({sf + ": float16", [=] {
                     ops::softmax_attention_fused(q.to(torch::kHalf), k.to(torch::kHalf), v.to(torch::kHalf), true, scale);
                   }, sf});
  cases.push_back({sf + ": key_mask of another batch size",
                   [=] { ops::softmax_attention_fused(q, k, v, false, scale, all_true({kB + 1, kT})); }, "key_mask"});
  cases.push_back({sf + ": float key_mask",
                   [=] { ops::softmax_attention_fused(q, k, v, false, scale, torch::ones({kB, kT})); }, "key_mask"});
  cases.push_back({sf + ": non-finite scale", [=] { ops::softmax_attention_fused(q, k, v, true, kNaN); }, "scale"});

  // The raw forward reports under the fused op's name.
  const std::string ff = "softmax_attention_fused_forward";
  cases.push_back({ff + ": q of rank 3",
                   [=] { ops::softmax_attention_fused_forward(q.flatten(2), k, v, true, scale); }, sf});
  cases.push_back({ff + ": v with another key length",
                   [=] { ops::softmax_attention_fused_forward(q, k, rnd({kB, kT + 1, kH, kDv}), true, scale); }, sf});
  cases.push_back({ff + ": mixed dtypes",
                   [=] { ops::softmax_attention_fused_forward(q, k, v.to(torch::kFloat), true, scale); }, sf});
  cases.push_back({ff + ": key_mask of another length",
                   [=] { ops::softmax_attention_fused_forward(q, k, v, true, scale, all_true({kB, kT + 1})); }, "key_mask"});

  const std::string fb = "softmax_attention_fused_backward";
  const auto fwd = ops::softmax_attention_fused_forward(q, k, v, true, scale);
  const auto out = fwd.out, lse = fwd.lse, grad = rnd({kB, kT, kH, kDv});
  cases.push_back({fb + ": grad_out of rank 3",
                   [=] { ops::softmax_attention_fused_backward(grad.flatten(2), q, k, v, out, lse, true, scale); }, fb});
  cases.push_back({fb + ": out with another value width", [=] {
                     ops::softmax_attention_fused_backward(grad, q, k, v, rnd({kB, kT, kH, kDv + 1}), lse, true, scale);
                   }, fb});
  cases.push_back({fb + ": lse laid out [B,T,H]", [=] {
                     ops::softmax_attention_fused_backward(grad, q, k, v, out, lse.transpose(1, 2).contiguous(), true, scale);
                   }, fb});
  cases.push_back({fb + ": float out", [=] {
                     ops::softmax_attention_fused_backward(grad, q, k, v, out.to(torch::kFloat), lse, true, scale);
                   }, fb});
  cases.push_back({fb + ": q of rank 3",
                   [=] { ops::softmax_attention_fused_backward(grad, q.flatten(2), k, v, out, lse, true, scale); }, fb});
  cases.push_back({fb + ": k longer than v", [=] {
                     ops::softmax_attention_fused_backward(grad, q, rnd({kB, kT + 1, kH, kDk}), v, out, lse, true, scale);
                   }, fb});
  cases.push_back({fb + ": key_mask of another batch size", [=] {
                     ops::softmax_attention_fused_backward(grad, q, k, v, out, lse, true, scale, all_true({kB + 1, kT}));
                   }, "key_mask"});

  const std::string ck = "causal_key_mask";
  cases.push_back({ck + ": negative query count", [=] { ops::causal_key_mask(-1, kT, kCpu); }, ck});
  cases.push_back({ck + ": more queries than keys", [=] { ops::causal_key_mask(kT + 1, kT, kCpu); }, ck});

  const std::string vk = "visible_keys";
  cases.push_back({vk + ": key_mask of rank 1", [=] { ops::visible_keys(kT, kT, true, all_true({kT}), kCpu); }, "key_mask"});
  cases.push_back({vk + ": key_mask of another length",
                   [=] { ops::visible_keys(kT, kT, true, all_true({kB, kT + 1}), kCpu); }, "key_mask"});
  cases.push_back({vk + ": integer key_mask",
                   [=] { ops::visible_keys(kT, kT, false, torch::ones({kB, kT}, torch::kLong), kCpu); }, "key_mask"});
  cases.push_back({vk + ": more queries than keys", [=] { ops::visible_keys(kT + 1, kT, true, mask, kCpu); }, vk});

  expect_clear_errors(cases);
}

TEST(BadShapes, Aft) {
  torch::manual_seed(1);
  const auto k = rnd({kB, kT, kC}), v = rnd({kB, kT, kC});
  std::vector<BadCall> cases;

  const std::string ai = "aft_initial_state";
  cases.push_back({ai + ": negative batch size", [=] { ops::aft_initial_state(-1, kC, kF64); }, ai});
  cases.push_back({ai + ": negative channel count", [=] { ops::aft_initial_state(kB, -1, kF64); }, ai});
  cases.push_back({ai + ": integer dtype", [=] { ops::aft_initial_state(kB, kC, torch::TensorOptions(torch::kLong)); }, ai});

  const std::string an = "aft_naive";
  cases.push_back({an + ": k of rank 4", [=] { ops::aft_naive(k.unsqueeze(0), v); }, an});
  cases.push_back({an + ": v of rank 2", [=] { ops::aft_naive(k, v.select(0, 0)); }, an});
  cases.push_back({an + ": v of another length", [=] { ops::aft_naive(k, rnd({kB, kT + 1, kC})); }, an});
  cases.push_back({an + ": v with another channel count", [=] { ops::aft_naive(k, rnd({kB, kT, kC + 1})); }, an});
  cases.push_back({an + ": mixed dtypes", [=] { ops::aft_naive(k, v.to(torch::kFloat)); }, an});
  cases.push_back({an + ": mask of another length", [=] { ops::aft_naive(k, v, all_true({kB, kT - 1})); }, an});
  cases.push_back({an + ": mask of another batch size", [=] { ops::aft_naive(k, v, all_true({kB + 1, kT})); }, an});
  cases.push_back({an + ": float mask", [=] { ops::aft_naive(k, v, torch::ones({kB, kT})); }, an});

  const std::string as = "aft_step";
  const auto k_t = rnd({kB, kC}), v_t = rnd({kB, kC});
  cases.push_back({as + ": k_t of rank 3", [=] {
                     auto state = ops::aft_initial_state(kB, kC, kF64);
                     ops::aft_step(rnd({kB, 1, kC}), v_t, state);
                   }, as});
  cases.push_back({as + ": v_t of rank 1", [=] {
                     auto state = ops::aft_initial_state(kB, kC, kF64);
                     ops::aft_step(k_t, rnd({kC}), state);
                   }, as});
  cases.push_back({as + ": v_t with another channel count", [=] {
                     auto state = ops::aft_initial_state(kB, kC, kF64);
                     ops::aft_step(k_t, rnd({kB, kC + 1}), state);
                   }, as});
  cases.push_back({as + ": state of another batch size", [=] {
                     auto state = ops::aft_initial_state(kB + 1, kC, kF64);
                     ops::aft_step(k_t, v_t, state);
                   }, as});
  cases.push_back({as + ": mask_t of another batch size", [=] {
                     auto state = ops::aft_initial_state(kB, kC, kF64);
                     ops::aft_step(k_t, v_t, state, all_true({kB + 1}));
                   }, as});
  cases.push_back({as + ": float mask_t", [=] {
                     auto state = ops::aft_initial_state(kB, kC, kF64);
                     ops::aft_step(k_t, v_t, state, torch::ones({kB}));
                   }, as});

  const std::string af = "aft_fused";
  cases.push_back({af + ": k of rank 2", [=] { ops::aft_fused(k.select(0, 0), v); }, af});
  cases.push_back({af + ": v of another length", [=] { ops::aft_fused(k, rnd({kB, kT + 1, kC})); }, af});
  cases.push_back({af + ": mixed dtypes", [=] { ops::aft_fused(k.to(torch::kFloat), v); }, af});
  cases.push_back({af + ": float16", [=] { ops::aft_fused(k.to(torch::kHalf), v.to(torch::kHalf)); }, af});
  cases.push_back({af + ": mask of another length", [=] { ops::aft_fused(k, v, all_true({kB, kT + 1})); }, af});
  cases.push_back({af + ": float mask", [=] { ops::aft_fused(k, v, torch::ones({kB, kT}, kF64)); }, af});

  expect_clear_errors(cases);
}

TEST(BadShapes, Ssm) {
  torch::manual_seed(2);
  const auto u = rnd({kB, kT, kC}), delta = torch::softplus(rnd({kB, kT, kC})), A = -positive({kC, kN});
  const auto b = rnd({kB, kT, kN}), c = rnd({kB, kT, kN});
  std::vector<BadCall> cases;

  const std::string sn = "ssm_scan_naive";
  cases.push_back({sn + ": u of rank 2", [=] { ops::ssm_scan_naive(u.select(0, 0), delta, A, b, c); }, sn});
  cases.push_back({sn + ": A of rank 3", [=] { ops::ssm_scan_naive(u, delta, A.unsqueeze(0), b, c); }, sn});
  cases.push_back({sn + ": A with another channel count", [=] { ops::ssm_scan_naive(u, delta, -positive({kC + 1, kN}), b, c); }, sn});
  cases.push_back({sn + ": delta of another length", [=] { ops::ssm_scan_naive(u, delta.narrow(1, 0, kT - 1), A, b, c); }, sn});
  cases.push_back({sn + ": b and c of another length",
                   [=] { ops::ssm_scan_naive(u, delta, A, rnd({kB, kT + 1, kN}), rnd({kB, kT + 1, kN})); }, sn});
  cases.push_back({sn + ": c with another state size", [=] { ops::ssm_scan_naive(u, delta, A, b, rnd({kB, kT, kN + 1})); }, sn});
  cases.push_back({sn + ": mixed dtypes", [=] { ops::ssm_scan_naive(u, delta, A.to(torch::kFloat), b, c); }, sn});

  const std::string ss = "ssm_step";
  const auto u_t = rnd({kB, kC}), delta_t = torch::softplus(rnd({kB, kC})), b_t = rnd({kB, kN}), c_t = rnd({kB, kN});
  const auto fresh_state = [] { return torch::zeros({kB, kC, kN}, kF64); };
  cases.push_back({ss + ": u_t of rank 3", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(rnd({kB, 1, kC}), delta_t, A, b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": state of rank 2", [=] {
                     auto state = torch::zeros({kB, kC * kN}, kF64);
                     ops::ssm_step(u_t, delta_t, A, b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": A of rank 1", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, delta_t, -positive({kN}), b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": A with another channel count", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, delta_t, -positive({kC + 1, kN}), b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": delta_t with another channel count", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, torch::softplus(rnd({kB, kC + 1})), A, b_t, c_t, state);
                   }, ss});
  cases.push_back({ss + ": b_t with another state size", [=] {
                     auto state = fresh_state();
                     ops::ssm_step(u_t, delta_t, A, rnd({kB, kN + 1}), c_t, state);
                   }, ss});
  cases.push_back({ss + ": state of another batch size", [=] {
                     auto state = torch::zeros({kB + 1, kC, kN}, kF64);
                     ops::ssm_step(u_t, delta_t, A, b_t, c_t, state);
                   }, ss});

  const std::string sf = "ssm_scan_fused";
  cases.push_back({sf + ": u of rank 2", [=] { ops::ssm_scan_fused(u.select(0, 0), delta, A, b, c); }, sf});
  cases.push_back({sf + ": delta of another length", [=] { ops::ssm_scan_fused(u, delta.narrow(1, 0, kT - 1), A, b, c); }, sf});
  cases.push_back({sf + ": A with another state size", [=] { ops::ssm_scan_fused(u, delta, -positive({kC, kN + 1}), b, c); }, sf});
  cases.push_back({sf + ": b and c of another batch size",
                   [=] { ops::ssm_scan_fused(u, delta, A, rnd({kB + 1, kT, kN}), rnd({kB + 1, kT, kN})); }, sf});
  cases.push_back({sf + ": mixed dtypes", [=] { ops::ssm_scan_fused(u.to(torch::kFloat), delta, A, b, c); }, sf});
  cases.push_back({sf + ": float16", [=] {
                     const auto h = torch::kHalf;
                     ops::ssm_scan_fused(u.to(h), delta.to(h), A.to(h), b.to(h), c.to(h));
                   }, sf});

  expect_clear_errors(cases);
}

TEST(BadShapes, LinearAttention) {
  torch::manual_seed(3);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  std::vector<BadCall> cases;

  const std::string ln = "linear_attention_naive";
  cases.push_back({ln + ": q of rank 3", [=] { ops::linear_attention_naive(q.flatten(2), k, v, true); }, ln});
  cases.push_back({ln + ": k with another head width", [=] { ops::linear_attention_naive(q, rnd({kB, kT, kH, kDk + 1}), v, true); }, ln});
  cases.push_back({ln + ": k with another batch size", [=] { ops::linear_attention_naive(q, rnd({kB + 1, kT, kH, kDk}), v, false); }, ln});
  cases.push_back({ln + ": v of another length", [=] { ops::linear_attention_naive(q, k, rnd({kB, kT + 1, kH, kDv}), true); }, ln});
  cases.push_back({ln + ": v with another head count", [=] { ops::linear_attention_naive(q, k, rnd({kB, kT, kH + 1, kDv}), false); }, ln});
  cases.push_back({ln + ": mixed dtypes", [=] { ops::linear_attention_naive(q, k, v.to(torch::kFloat), true); }, ln});

  const std::string li = "linear_attention_initial_state";
  cases.push_back({li + ": negative head count", [=] { ops::linear_attention_initial_state(kB, -1, kDk, kDv, kF64); }, li});
  cases.push_back({li + ": negative value width", [=] { ops::linear_attention_initial_state(kB, kH, kDk, -1, kF64); }, li});
  cases.push_back({li + ": integer dtype", [=] {
                     ops::linear_attention_initial_state(kB, kH, kDk, kDv, torch::TensorOptions(torch::kLong));
                   }, li});

  const std::string ls = "linear_attention_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  const auto fresh_state = [] { return ops::linear_attention_initial_state(kB, kH, kDk, kDv, kF64); };
  cases.push_back({ls + ": q_t of rank 4", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t.unsqueeze(1), k_t, v_t, state);
                   }, ls});
  cases.push_back({ls + ": v_t of rank 2", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t, k_t, v_t.flatten(1), state);
                   }, ls});
  cases.push_back({ls + ": state.kv of rank 3", [=] {
                     auto state = fresh_state();
                     state.kv = torch::zeros({kB, kH, kDk * kDv}, kF64);
                     ops::linear_attention_step(q_t, k_t, v_t, state);
                   }, ls});
  cases.push_back({ls + ": q_t with another head width", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(rnd({kB, kH, kDk + 1}), k_t, v_t, state);
                   }, ls});
  cases.push_back({ls + ": k_t with another head width", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t, rnd({kB, kH, kDk + 1}), v_t, state);
                   }, ls});
  cases.push_back({ls + ": v_t with another value width", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(q_t, k_t, rnd({kB, kH, kDv + 1}), state);
                   }, ls});
  cases.push_back({ls + ": state of batch size 1 for a batch of 2", [=] {
                     auto state = ops::linear_attention_initial_state(1, kH, kDk, kDv, kF64);
                     ops::linear_attention_step(q_t, k_t, v_t, state);
                   }, ls});
  cases.push_back({ls + ": state of another key width than q_t and k_t", [=] {
                     auto state = fresh_state();
                     ops::linear_attention_step(rnd({kB, kH, kDk + 1}), rnd({kB, kH, kDk + 1}), v_t, state);
                   }, "key features"});
  cases.push_back({ls + ": state without k_sum", [=] {
                     auto state = fresh_state();
                     state.k_sum = torch::Tensor();
                     ops::linear_attention_step(q_t, k_t, v_t, state);
                   }, ls});

  const std::string lf = "linear_attention_fused";
  cases.push_back({lf + ": q of rank 3", [=] { ops::linear_attention_fused(q.flatten(2), k, v, true); }, lf});
  cases.push_back({lf + ": k of another length", [=] { ops::linear_attention_fused(q, rnd({kB, kT + 1, kH, kDk}), v, false); }, lf});
  cases.push_back({lf + ": v with another head count", [=] { ops::linear_attention_fused(q, k, rnd({kB, kT, kH + 1, kDv}), true); }, lf});
  cases.push_back({lf + ": mixed dtypes", [=] { ops::linear_attention_fused(q.to(torch::kFloat), k, v, false); }, lf});
  cases.push_back({lf + ": float16 (causal)", [=] {
                     ops::linear_attention_fused(q.to(torch::kHalf), k.to(torch::kHalf), v.to(torch::kHalf), true);
                   }, lf});

  expect_clear_errors(cases);
}

TEST(BadShapes, Gla) {
  torch::manual_seed(4);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto a = -torch::softplus(rnd({kB, kT, kH}));
  std::vector<BadCall> cases;

  const std::string gn = "gla_naive";
  cases.push_back({gn + ": q of rank 3", [=] { ops::gla_naive(q.flatten(2), k, v, a); }, gn});
  cases.push_back({gn + ": log_decay of rank 4", [=] { ops::gla_naive(q, k, v, a.unsqueeze(-1)); }, gn});
  cases.push_back({gn + ": log_decay with another head count", [=] { ops::gla_naive(q, k, v, -positive({kB, kT, kH + 1})); }, gn});
  cases.push_back({gn + ": log_decay missing", [=] { ops::gla_naive(q, k, v, torch::Tensor()); }, gn});
  cases.push_back({gn + ": v of another length", [=] { ops::gla_naive(q, k, rnd({kB, kT + 1, kH, kDv}), a); }, gn});
  cases.push_back({gn + ": mixed dtypes", [=] { ops::gla_naive(q, k, v, a.to(torch::kFloat)); }, gn});

  const std::string gs = "gla_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  const auto a_t = -torch::softplus(rnd({kB, kH}));
  const auto fresh_state = [] { return ops::linear_attention_initial_state(kB, kH, kDk, kDv, kF64); };
  cases.push_back({gs + ": log_decay_t of rank 3", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, k_t, v_t, a_t.unsqueeze(-1), state);
                   }, gs});
  cases.push_back({gs + ": q_t of rank 2", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t.flatten(1), k_t, v_t, a_t, state);
                   }, gs});
  cases.push_back({gs + ": log_decay_t with another head count", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, k_t, v_t, -positive({kB, kH + 1}), state);
                   }, gs});
  cases.push_back({gs + ": k_t with another batch size", [=] {
                     auto state = fresh_state();
                     ops::gla_step(q_t, rnd({kB + 1, kH, kDk}), v_t, a_t, state);
                   }, gs});
  cases.push_back({gs + ": state.kv of rank 3", [=] {
                     auto state = fresh_state();
                     state.kv = torch::zeros({kB, kH, kDk * kDv}, kF64);
                     ops::gla_step(q_t, k_t, v_t, a_t, state);
                   }, gs});
  cases.push_back({gs + ": state of another key width than q_t and k_t", [=] {
                     auto state = fresh_state();
                     ops::gla_step(rnd({kB, kH, kDk + 1}), rnd({kB, kH, kDk + 1}), v_t, a_t, state);
                   }, "key features"});
  cases.push_back({gs + ": state of batch size 1 for a batch of 2", [=] {
                     auto state = ops::linear_attention_initial_state(1, kH, kDk, kDv, kF64);
                     ops::gla_step(q_t, k_t, v_t, a_t, state);
                   }, gs});

  const std::string gf = "gla_fused";
  cases.push_back({gf + ": q of rank 3", [=] { ops::gla_fused(q.flatten(2), k, v, a); }, gf});
  cases.push_back({gf + ": k with another head width", [=] { ops::gla_fused(q, rnd({kB, kT, kH, kDk + 1}), v, a); }, gf});
  cases.push_back({gf + ": log_decay with another head count", [=] { ops::gla_fused(q, k, v, -positive({kB, kT, kH + 1})); }, gf});
  cases.push_back({gf + ": log_decay missing", [=] { ops::gla_fused(q, k, v, torch::Tensor()); }, gf});
  cases.push_back({gf + ": mixed dtypes", [=] { ops::gla_fused(q, k, v, a.to(torch::kFloat)); }, gf});
  cases.push_back({gf + ": float16", [=] {
                     const auto h = torch::kHalf;
                     ops::gla_fused(q.to(h), k.to(h), v.to(h), a.to(h));
                   }, gf});

  expect_clear_errors(cases);
}

TEST(BadShapes, Ela) {
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
  cases.push_back({ei + ": negative batch size", [=] { ops::ela_initial_state(-1, kH, kDk, kDv, poly, kF64); }, ei});
  cases.push_back({ei + ": negative head width", [=] { ops::ela_initial_state(kB, kH, -1, kDv, hadamard, kF64); }, ei});
  cases.push_back({ei + ": integer dtype", [=] {
                     ops::ela_initial_state(kB, kH, kDk, kDv, poly, torch::TensorOptions(torch::kLong));
                   }, ei});

  const std::string es = "ela_step";
  const auto q_t = rnd({kB, kH, kDk}), k_t = rnd({kB, kH, kDk}), v_t = rnd({kB, kH, kDv});
  cases.push_back({es + ": q_t of rank 4", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, hadamard, kF64);
                     ops::ela_step(q_t.unsqueeze(1), k_t, v_t, hadamard, state);
                   }, es});
  cases.push_back({es + ": state.kv of rank 3", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly, kF64);
                     state.kv = state.kv.flatten(2);
                     ops::ela_step(q_t, k_t, v_t, poly, state);
                   }, es});
  cases.push_back({es + ": k_t with another head width", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, hadamard, kF64);
                     ops::ela_step(q_t, rnd({kB, kH, kDk + 1}), v_t, hadamard, state);
                   }, es});
  cases.push_back({es + ": v_t with another value width", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly, kF64);
                     ops::ela_step(q_t, k_t, rnd({kB, kH, kDv + 1}), poly, state);
                   }, es});
  cases.push_back({es + ": the state of another kernel", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly, kF64);
                     ops::ela_step(q_t, k_t, v_t, hadamard, state);
                   }, es});
  cases.push_back({es + ": negative eps", [=] {
                     auto state = ops::ela_initial_state(kB, kH, kDk, kDv, poly, kF64);
                     ops::ela_step(q_t, k_t, v_t, poly, state, -1.0);
                   }, "eps"});

  expect_clear_errors(cases);
}

TEST(BadShapes, Fem) {
  torch::manual_seed(6);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto beta = positive({kH * kDv});
  const double cap = 5.0, scale = 0.5;
  std::vector<BadCall> cases;

  const std::string fs = "fem_scale_values";
  const auto v3 = rnd({kB, kT, kC}), beta_c = positive({kC});
  cases.push_back({fs + ": negative cap", [=] { ops::fem_scale_values(v3, beta_c, -1.0); }, fs});
  cases.push_back({fs + ": beta of another width", [=] { ops::fem_scale_values(v3, positive({kC + 1}), cap); }, fs});
  cases.push_back({fs + ": v of rank 0", [=] { ops::fem_scale_values(torch::scalar_tensor(1.0, kF64), beta_c, cap); }, fs});

  const std::string fr = "fem_restore";
  const auto z = positive({kB, kT, kC}), shift = rnd({kB, kT, 1});
  cases.push_back({fr + ": beta of another width", [=] { ops::fem_restore(z, shift, positive({kC + 1})); }, fr});
  cases.push_back({fr + ": z of rank 0", [=] { ops::fem_restore(torch::scalar_tensor(1.0, kF64), shift, beta_c); }, fr});
  cases.push_back({fr + ": shift not broadcastable to z", [=] { ops::fem_restore(z, rnd({kB, kT, kC + 1}), beta_c); }, fr});

  const std::string fn = "fem_softmax_read_naive";
  cases.push_back({fn + ": q of rank 3", [=] { ops::fem_softmax_read_naive(q.flatten(2), k, v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": beta with another entry count",
                   [=] { ops::fem_softmax_read_naive(q, k, v, positive({kH * kDv + 1}), cap, true, scale); }, fn});
  cases.push_back({fn + ": mixed dtypes",
                   [=] { ops::fem_softmax_read_naive(q, k, v, beta.to(torch::kFloat), cap, true, scale); }, fn});
  cases.push_back({fn + ": k with another batch size",
                   [=] { ops::fem_softmax_read_naive(q, rnd({kB + 1, kT, kH, kDk}), v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": k with another head width",
                   [=] { ops::fem_softmax_read_naive(q, rnd({kB, kT, kH, kDk + 1}), v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": v of another key length",
                   [=] { ops::fem_softmax_read_naive(q, k, rnd({kB, kT + 1, kH, kDv}), beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": more queries than keys",
                   [=] { ops::fem_softmax_read_naive(rnd({kB, kT + 1, kH, kDk}), k, v, beta, cap, true, scale); }, fn});
  cases.push_back({fn + ": negative cap", [=] { ops::fem_softmax_read_naive(q, k, v, beta, -1.0, true, scale); }, "cap"});
  cases.push_back({fn + ": key_mask of another length",
                   [=] { ops::fem_softmax_read_naive(q, k, v, beta, cap, true, scale, all_true({kB, kT + 1})); }, "key_mask"});
  cases.push_back({fn + ": non-finite scale", [=] { ops::fem_softmax_read_naive(q, k, v, beta, cap, true, kNaN); }, "scale"});

  const std::string ff = "fem_softmax_read_fused";
  cases.push_back({ff + ": q of rank 3", [=] { ops::fem_softmax_read_fused(q.flatten(2), k, v, beta, cap, true, scale); }, ff});
  cases.push_back({ff + ": v of rank 3", [=] { ops::fem_softmax_read_fused(q, k, v.flatten(2), beta, cap, true, scale); }, ff});
  cases.push_back({ff + ": k with another head count",
                   [=] { ops::fem_softmax_read_fused(q, rnd({kB, kT, kH + 1, kDk}), v, beta, cap, true, scale); }, ff});
  cases.push_back({ff + ": beta with another entry count",
                   [=] { ops::fem_softmax_read_fused(q, k, v, positive({kH * kDv + 1}), cap, true, scale); }, ff});
  cases.push_back({ff + ": mixed dtypes",
                   [=] { ops::fem_softmax_read_fused(q, k, v, beta.to(torch::kFloat), cap, true, scale); }, ff});
  cases.push_back({ff + ": cap 0", [=] { ops::fem_softmax_read_fused(q, k, v, beta, 0.0, true, scale); }, "cap"});
  cases.push_back({ff + ": negative cap", [=] { ops::fem_softmax_read_fused(q, k, v, beta, -1.0, true, scale); }, "cap"});
  cases.push_back({ff + ": float32 cap above 40", [=] {
                     const auto f = torch::kFloat;
                     ops::fem_softmax_read_fused(q.to(f), k.to(f), v.to(f), beta.to(f), 41.0, true, scale);
                   }, "cap"});
  cases.push_back({ff + ": float64 cap above 43", [=] { ops::fem_softmax_read_fused(q, k, v, beta, 50.0, true, scale); }, "cap"});
  cases.push_back({ff + ": float key_mask",
                   [=] { ops::fem_softmax_read_fused(q, k, v, beta, cap, false, scale, torch::ones({kB, kT})); }, "key_mask"});
  cases.push_back({ff + ": non-finite scale", [=] { ops::fem_softmax_read_fused(q, k, v, beta, cap, true, kNaN); }, "scale"});

  expect_clear_errors(cases);
}

TEST(BadShapes, Hypermlp) {
  torch::manual_seed(7);
  constexpr int64_t kQk = 3, kVo = 4, kRank = 2, kLmax = 8;
  const auto q = rnd({kB, kT, kH, kQk}), k = rnd({kB, kT, kH, kQk}), v = rnd({kB, kT, kH, kVo});
  const auto mixing = [](int64_t heads, int64_t lmax) {
    return ops::HyperMixing{0.5 * rnd({heads, lmax}), 0.7 * rnd({heads, lmax, kRank}), 0.7 * rnd({heads, kRank, lmax})};
  };
  const auto s1 = torch::sigmoid(rnd({kB, kT, kH, kRank})), s2 = torch::sigmoid(rnd({kB, kT, kH, kRank}));
  const auto mix1 = mixing(kH, kLmax), mix2 = mixing(kH, kLmax);
  ops::HyperReadOptions options;  // relu, lag layout
  options.block = 2;
  std::vector<BadCall> cases;

  using Read = decltype(&ops::hypermlp_read_blocked);
  const std::vector<std::pair<Read, std::string>> reads = {{&ops::hypermlp_read_blocked, "hypermlp_read_blocked"},
                                                           {&ops::hypermlp_read_dense, "hypermlp_read_dense"}};
  for (const auto& entry : reads) {
    const Read read = entry.first;
    const std::string op = entry.second;
    cases.push_back({op + ": q of rank 3", [=] { read(q.flatten(2), k, v, s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": v of another length",
                     [=] { read(q, k, rnd({kB, kT + 1, kH, kVo}), s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": k with another head width",
                     [=] { read(q, rnd({kB, kT, kH, kQk + 1}), v, s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": glu with one score head per value head", [=] {
                       auto o = options;
                       o.activation = ops::HyperActivation::glu;
                       read(q, k, v, {}, {}, s2, mix2, o);
                     }, op});
    cases.push_back({op + ": more queries than keys",
                     [=] { read(rnd({kB, kT + 1, kH, kQk}), k, v, {}, {}, {}, {}, options); }, op});
    cases.push_back({op + ": mixed dtypes", [=] { read(q, k, v.to(torch::kFloat), s1, mix1, s2, mix2, options); }, op});
    cases.push_back({op + ": s1 without its mixing parameters", [=] { read(q, k, v, s1, {}, s2, mix2, options); }, op});
    cases.push_back({op + ": mixing U of rank 2", [=] {
                       auto m = mix1;
                       m.U = m.U.select(2, 0);
                       read(q, k, v, s1, m, s2, mix2, options);
                     }, op});
    cases.push_back({op + ": s2 with another head count",
                     [=] { read(q, k, v, s1, mix1, torch::sigmoid(rnd({kB, kT, kH + 1, kRank})), mix2, options); }, op});
    cases.push_back({op + ": mixing shorter than the keys",
                     [=] { read(q, k, v, s1, mixing(kH, kT - 1), s2, mix2, options); }, op});
    cases.push_back({op + ": float mixing diag", [=] {
                       auto m = mix2;
                       m.diag = m.diag.to(torch::kFloat);
                       read(q, k, v, s1, mix1, s2, m, options);
                     }, op});
    cases.push_back({op + ": negative block", [=] {
                       auto o = options;
                       o.block = -1;
                       read(q, k, v, s1, mix1, s2, mix2, o);
                     }, "block"});
    cases.push_back({op + ": negative eps", [=] {
                       auto o = options;
                       o.eps = -1.0;
                       read(q, k, v, s1, mix1, s2, mix2, o);
                     }, "eps"});
    cases.push_back({op + ": unknown activation", [=] {
                       auto o = options;
                       o.activation = static_cast<ops::HyperActivation>(7);
                       read(q, k, v, s1, mix1, s2, mix2, o);
                     }, "activation"});
  }

  expect_clear_errors(cases);
}

TEST(BadShapes, Impl) {
  const std::vector<BadCall> cases = {
      {"parse_impl: unknown name", [] { ops::parse_impl("fast"); }, "fast"},
      {"parse_impl: capitalised name", [] { ops::parse_impl("Fused"); }, "Fused"},
      {"parse_impl: empty name", [] { ops::parse_impl(""); }, "unknown impl"},
  };
  expect_clear_errors(cases);
}

TEST(BadShapes, PriorRead) {
  torch::manual_seed(8);
  const auto numerator = rnd({kB, kT, kH, kDv}), normaliser = positive({kB, kT, kH});
  const std::string nr = "normalised_read";
  const std::vector<BadCall> cases = {
      {nr + ": normaliser of rank 2", [=] { ops::normalised_read({numerator, positive({kB, kT})}, 1e-6); }, nr},
      {nr + ": normaliser with another head count",
       [=] { ops::normalised_read({numerator, positive({kB, kT, kH + 1})}, 1e-6); }, nr},
      {nr + ": per-channel normaliser with another channel count",
       [=] { ops::normalised_read({rnd({kB, kT, kC}), positive({kB, kT, kC + 1})}, 1e-6); }, nr},
      {nr + ": negative eps", [=] { ops::normalised_read({numerator, normaliser}, -1.0); }, "eps"},
  };
  expect_clear_errors(cases);
}

TEST(BadShapes, SecondOrderAttention) {
  torch::manual_seed(9);
  const auto q = rnd({kB, kT, kH, kDk}), k = rnd({kB, kT, kH, kDk}), v = rnd({kB, kT, kH, kDv});
  const auto temperature = positive({kH}), bias_scale = rnd({kH}), tau = rnd({kH});
  std::vector<BadCall> cases;

  using Mha = decltype(&ops::mha2nd1st_read);
  const std::vector<std::pair<Mha, std::string>> mhas = {{&ops::mha2nd1st_read, "mha2nd1st_read"},
                                                         {&ops::mha2nd1st_read_covariance, "mha2nd1st_read_covariance"}};
  for (const auto& entry : mhas) {
    const Mha read = entry.first;
    const std::string op = entry.second;
    cases.push_back({op + ": q of rank 3", [=] { read(q.flatten(2), k, temperature, bias_scale, true); }, op});
    cases.push_back({op + ": k with another head width", [=] { read(q, rnd({kB, kT, kH, kDk + 1}), temperature, bias_scale, true); }, op});
    cases.push_back({op + ": k with another batch size", [=] { read(q, rnd({kB + 1, kT, kH, kDk}), temperature, bias_scale, false); }, op});
    cases.push_back({op + ": temperature with another entry count", [=] { read(q, k, positive({kH + 1}), bias_scale, true); }, op});
    cases.push_back({op + ": bias_scale of rank 2", [=] { read(q, k, temperature, bias_scale.unsqueeze(0), true); }, op});
    cases.push_back({op + ": temperature missing", [=] { read(q, k, torch::Tensor(), bias_scale, true); }, op});
    cases.push_back({op + ": mixed dtypes", [=] { read(q, k.to(torch::kFloat), temperature, bias_scale, true); }, op});
  }

  using Light = decltype(&ops::light2nd1st_read);
  const std::vector<std::pair<Light, std::string>> lights = {
      {&ops::light2nd1st_read, "light2nd1st_read"}, {&ops::light2nd1st_read_covariance, "light2nd1st_read_covariance"}};
  for (const auto& entry : lights) {
    const Light read = entry.first;
    const std::string op = entry.second;
    cases.push_back({op + ": q of rank 3", [=] { read(q.flatten(2), k, v, 0.5, tau, true); }, op});
    cases.push_back({op + ": v of another key length", [=] { read(q, k, rnd({kB, kT + 1, kH, kDv}), 0.5, tau, true); }, op});
    cases.push_back({op + ": v with another head count", [=] { read(q, k, rnd({kB, kT, kH + 1, kDv}), 0.5, tau, false); }, op});
    cases.push_back({op + ": tau with another entry count", [=] { read(q, k, v, 0.5, rnd({kH + 1}), true); }, op});
    cases.push_back({op + ": tau missing", [=] { read(q, k, v, 0.5, torch::Tensor(), true); }, op});
    cases.push_back({op + ": mixed dtypes", [=] { read(q, k, v.to(torch::kFloat), 0.5, tau, true); }, op});
    cases.push_back({op + ": non-finite scale", [=] { read(q, k, v, kNaN, tau, true); }, "scale"});
  }

  expect_clear_errors(cases);
}

}  // namespace
}  // namespace seqmix

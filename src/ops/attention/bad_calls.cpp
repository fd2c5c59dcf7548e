// attention's calls with bad arguments (the op table's bad_calls): each must fail with one line naming the op or the
// argument. tests/ops/bad_shapes_test.cpp runs them.
#include <torch/torch.h>

#include "../common/bad_call_support.h"
#include "seqmix/ops/attention.h"

namespace seqmix::ops {
using namespace bad_call_support;

std::vector<BadCall> attention_bad_calls() {
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

  return cases;
}

}  // namespace seqmix::ops

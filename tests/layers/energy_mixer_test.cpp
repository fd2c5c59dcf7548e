// The energy framework: one gradient step on the paper's recipes equals the attention it names
// (unnormalised linear attention, gated linear attention, softmax attention; paper §2, with W_Q^T W_K = W1^T W2
// per head and the value map (eta T / H) W1^T W2 or (eta / H) W1^T W2), momentum and Nesterov steps equal
// their definitions, the Newton step (autograd Hessian, pseudo-inverse) equals the direct range-space solve,
// and its first-order Taylor form equals M (u + Cov u / T). Causality, decode and gradients are in the
// mixer contract test (every optimiser but newton, which refuses to be differentiated).
#include <gtest/gtest.h>

#include "seqmix/io/error.h"
#include "seqmix/layers/energy_mixer.h"
#include "seqmix/layers/second_order_attention.h"
#include "seqmix/modules/rotary.h"
#include "seqmix/ops/second_order.h"
#include "seqmix/models/registry.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

constexpr int64_t kDim = 8, kT = 5;

std::shared_ptr<EnergyMixerImpl> make(const std::string& spec) {
  torch::manual_seed(11);
  auto m = std::dynamic_pointer_cast<EnergyMixerImpl>(build_mixer(spec, MixerContext{kDim, 32}));
  m->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters())
    if (p.dim() == 2) p.normal_(0, 0.5);
  return m;
}

torch::Tensor input() {
  auto g = at::make_generator<at::CPUGeneratorImpl>(3);
  return torch::randn({2, kT, kDim}, g, torch::kDouble);
}

struct Heads {
  std::vector<torch::Tensor> W1, q, k;  // per head: W1 [dh,D], q [B,T,dh], k [B,T,dh]
};
Heads heads_of(EnergyMixerImpl& m, const torch::Tensor& x, int64_t H) {
  Heads h;
  const int64_t dh = kDim / H;
  for (int64_t j = 0; j < H; ++j) {
    auto W1 = m.w1->weight.narrow(0, j * dh, dh).detach(), W2 = m.w2->weight.narrow(0, j * dh, dh).detach();
    h.W1.push_back(W1);
    h.q.push_back(torch::matmul(x, W1.t()));
    h.k.push_back(torch::matmul(x, W2.t()));
  }
  return h;
}

// sum_h sum_{i<=t} weight(h, b, t, i) W1,h^T k_{h,i}, scaled.
template <typename Weight>
torch::Tensor attention_sum(const Heads& h, Weight weight, double scale) {
  auto out = torch::zeros({2, kT, kDim}, torch::kDouble);
  for (size_t j = 0; j < h.q.size(); ++j)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < kT; ++t)
        for (int64_t i = 0; i <= t; ++i)
          out[b][t] += scale * weight(j, b, t, i) * torch::matmul(h.W1[j].t(), h.k[j][b][i]);
  return out;
}

TEST(EnergyFramework, GradientStepOnNegSumSquaresIsUnnormalisedLinearAttention) {
  auto m = make("energy:local=abs_inner,global=neg_sum_squares,heads=2,eta=0.7,temperature=1.3");
  auto x = input();
  auto h = heads_of(*m, x, 2);
  auto expected = attention_sum(
      h, [&](size_t j, int64_t b, int64_t t, int64_t i) { return torch::dot(h.q[j][b][t], h.k[j][b][i]); },
      0.7 * 1.3 / 2);
  EXPECT_CLOSE(m->forward(x), expected, 1e-10, 1e-12);
}

TEST(EnergyFramework, GradientStepOnGatedSumSquaresIsGatedLinearAttention) {
  auto m = make("energy:local=abs_inner,global=gated_sum_squares,heads=2,eta=0.5,temperature=2");
  auto x = input();
  auto h = heads_of(*m, x, 2);
  auto decay = torch::sigmoid(m->gate(x)).detach();  // [B,T,H]
  auto expected = attention_sum(
      h,
      [&](size_t j, int64_t b, int64_t t, int64_t i) {
        auto gamma = torch::ones({}, torch::kDouble);
        for (int64_t r = i + 1; r <= t; ++r) gamma = gamma * decay[b][r][j];
        return gamma * torch::dot(h.q[j][b][t], h.k[j][b][i]);
      },
      0.5 * 2.0 / 2);
  EXPECT_CLOSE(m->forward(x), expected, 1e-10, 1e-12);
}

TEST(EnergyFramework, GradientStepOnTheHelmholtzEnergyIsSoftmaxAttention) {
  auto m = make("energy:local=neg_inner,global=helmholtz,heads=4,eta=1.5,temperature=0.8");
  auto x = input();
  auto h = heads_of(*m, x, 4);
  std::vector<torch::Tensor> probs;  // [B,T,T] per head, causal softmax of q.k / T
  for (int64_t j = 0; j < 4; ++j) {
    auto logits = torch::matmul(h.q[j], h.k[j].transpose(1, 2)) / 0.8;
    auto mask = torch::ones({kT, kT}, torch::kBool).triu(1);
    probs.push_back(torch::softmax(logits.masked_fill(mask, -INFINITY), -1));
  }
  auto expected = attention_sum(h, [&](size_t j, int64_t b, int64_t t, int64_t i) { return probs[j][b][t][i]; },
                                1.5 / 4);
  EXPECT_CLOSE(m->forward(x), expected, 1e-10, 1e-12);
}

// -dF/dz at the query states z against the context x, by autograd on the mixer's own energy.
torch::Tensor minus_gradient(EnergyMixerImpl& m, const torch::Tensor& z, const torch::Tensor& x) {
  auto leaf = z.detach().requires_grad_();
  return -torch::autograd::grad({m.energy(leaf, x).sum()}, {leaf})[0];
}

TEST(EnergyFramework, MomentumAndNesterovStepsFollowTheirDefinitions) {
  const double eta = 0.6, beta = 0.5;
  for (const std::string opt : {"momentum", "nesterov"}) {
    auto m = make("energy:local=half_sq_distance,global=helmholtz,heads=2,steps=3,eta=0.6,beta=0.5,optimizer=" + opt);
    auto x = input();
    auto z = x.clone(), p = torch::zeros_like(x);
    for (int s = 0; s < 3; ++s) {
      auto at = opt == "nesterov" ? z - beta * p : z;
      p = beta * p - minus_gradient(*m, at, x);
      z = z - eta * p;
    }
    EXPECT_CLOSE(m->forward(x), z - x, 1e-10, 1e-12) << opt;
  }
}

// Per head: u = q - kbar, Cov_p(k), with p the softmax of -||q - k_i||^2 / 2T over i <= t.
struct Moments {
  torch::Tensor u, cov;
};
Moments moments(const Heads& h, size_t j, int64_t b, int64_t t, double T) {
  auto keys = h.k[j][b].narrow(0, 0, t + 1);
  auto p = torch::softmax(-(keys - h.q[j][b][t]).square().sum(-1) / (2 * T), 0);
  auto kbar = torch::matmul(p, keys);
  auto centred = keys - kbar;
  return {h.q[j][b][t] - kbar, torch::matmul(centred.t() * p, centred)};
}

TEST(EnergyFramework, NewtonStepEqualsTheRangeSpaceSolveAndTaylorItsFirstOrder) {
  const double T = 1.7, eta = 0.9;
  for (const std::string opt : {"newton", "newton_taylor"}) {
    auto m = make("energy:local=half_sq_distance,global=helmholtz,heads=2,temperature=1.7,eta=0.9,optimizer=" + opt);
    auto x = input();
    auto h = heads_of(*m, x, 2);
    auto expected = torch::zeros_like(x);
    const int64_t dh = kDim / 2;
    for (size_t j = 0; j < 2; ++j) {
      auto M = torch::matmul(h.W1[j].t(), torch::inverse(torch::matmul(h.W1[j], h.W1[j].t())));
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < kT; ++t) {
          auto mo = moments(h, j, b, t, T);
          auto A = torch::eye(dh, torch::kDouble) - mo.cov / T;
          auto inner = opt == "newton" ? at::linalg_solve(A, mo.u) : mo.u + torch::matmul(mo.cov, mo.u) / T;
          expected[b][t] -= eta / 2 * torch::matmul(M, inner);
        }
    }
    torch::NoGradGuard no_grad;  // newton has no backward
    EXPECT_CLOSE(m->forward(x), expected, opt == "newton" ? 1e-7 : 1e-10, 1e-10) << opt;
    if (opt == "newton") {  // decoding equals the forward
      auto state = m->init_state(2);
      auto pre = m->prefill(x.narrow(1, 0, 2), state);
      std::vector<torch::Tensor> ys{pre};
      for (int64_t t = 2; t < kT; ++t) ys.push_back(m->step(x.select(1, t), state).unsqueeze(1));
      EXPECT_CLOSE(torch::cat(ys, 1), expected, 1e-7, 1e-10);
    }
  }
}

TEST(Mha2nd1st, DirectionsMapBackToTheRotatedQuerySpace) {
  // r_h = W_Q,h^T (W_Q,h W_Q,h^T)^-1 R_t^T (u + b): so W_Q,h r_h, rotated by the query's angle, is the read
  // u + b again (with RoPE the rotation must be undone before the pseudo-inverse; without it, it is absent).
  for (int rope : {0, 1}) {
    torch::manual_seed(9);
    auto m = std::dynamic_pointer_cast<Mha2nd1stImpl>(
        build_mixer("mha2nd1st:heads=2,rope=" + std::to_string(rope), MixerContext{16, 32}));
    m->to(torch::kDouble);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : m->parameters())
        if (p.dim() == 2) p.normal_(0, 0.5);
    }
    torch::NoGradGuard no_grad;
    auto x = torch::randn({2, 6, 16}, torch::kDouble);
    auto [q, k] = m->project(x, 3);
    auto r = m->directions(q, k, true, 3);  // [B,T,H,D]
    auto wq = m->qk->weight.narrow(0, 0, 16).view({2, 8, 16});
    auto back = torch::einsum("bthd,hed->bthe", {r, wq});  // W_Q,h r_h
    if (rope) back = apply_rotary(back, 3);
    EXPECT_CLOSE(back, ops::mha2nd1st_read_fused(q, k, m->temperature, m->bias_temperature, true), 1e-9, 1e-11)
        << "rope=" << rope;
  }
}

TEST(EnergyFramework, ErrorsNameTheProblem) {
  auto newton = make("energy:local=half_sq_distance,optimizer=newton");
  try {
    newton->forward(input());
    ADD_FAILURE() << "newton ran with gradients";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer=newton has no stable backward"), std::string::npos);
  }
  auto expect = [](const std::string& spec, const std::string& needle) {
    try {
      build_mixer(spec, MixerContext{kDim, 32});
      ADD_FAILURE() << spec << " built";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect("energy:optimizer=newton_taylor", "derived for global=helmholtz with local=half_sq_distance");
  expect("energy:beta=0.5", "beta applies to optimizer=momentum or nesterov only");
  expect("energy:p=2", "p applies to local=lp only");
  expect("energy:heads=3", "not divisible by heads=3");
  expect("energy:optimizer=adam", "must be one of gd, momentum, nesterov, newton, newton_taylor");
}

}  // namespace
}  // namespace seqmix

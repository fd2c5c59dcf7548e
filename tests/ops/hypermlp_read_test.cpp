// The blocked HyperMLP read against its dense naive twin (each row's R1, R2 materialised): outputs and the
// gradients of every input (q, k, v, both controls, both mixers' p, U, Vt), fp64 blocked against fp64 dense
// (tight) and fp32 blocked against fp64 dense (loose), for every activation and layout, each mixing side
// alone and both, block sizes that do and do not divide T, queries behind a longer key prefix (decode);
// finite-difference gradients of the dense read; argument checks.
#include <gtest/gtest.h>

#include "seqmix/ops/hypermlp.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

using ops::HyperActivation;
using ops::HyperLayout;

constexpr auto rnd = &testing::seeded_randn;

struct Case {
  HyperActivation activation;
  HyperLayout layout;
  bool mix_before, mix_after;
  int64_t T, S, block;
};

std::string describe(const Case& c) {
  const char* act[] = {"softmax", "relu", "glu"};
  return std::string(act[int(c.activation)]) + (c.layout == HyperLayout::lag ? " lag" : " forward") +
         (c.mix_before ? " R1" : "") + (c.mix_after ? " R2" : "") + " T" + std::to_string(c.T) + " S" +
         std::to_string(c.S) + " block" + std::to_string(c.block);
}

// Inputs in a fixed order: q, k, v, s1, p1, U1, Vt1, s2, p2, U2, Vt2 (the mixing ones only when on).
struct Inputs {
  std::vector<torch::Tensor> tensors;
  bool mix_before, mix_after;
};

constexpr int64_t kBatch = 2, kHeads = 2, kQK = 3, kVO = 5, kRank = 2, kLmax = 13;

Inputs make_inputs(const Case& c) {
  const int64_t Hq = c.activation == HyperActivation::glu ? 2 * kHeads : kHeads;
  Inputs in{{rnd({kBatch, c.T, Hq, kQK}, 1), rnd({kBatch, c.S, Hq, kQK}, 2), rnd({kBatch, c.S, kHeads, kVO}, 3)},
            c.mix_before, c.mix_after};
  auto add_mixing = [&](int64_t heads, uint64_t seed) {
    in.tensors.push_back(torch::sigmoid(rnd({kBatch, c.T, heads, kRank}, seed)));
    in.tensors.push_back(0.5 * rnd({heads, kLmax}, seed + 1));
    in.tensors.push_back(0.7 * rnd({heads, kLmax, kRank}, seed + 2));
    in.tensors.push_back(0.7 * rnd({heads, kRank, kLmax}, seed + 3));
  };
  if (c.mix_before) add_mixing(Hq, 10);
  if (c.mix_after) add_mixing(kHeads, 20);
  return in;
}

using Read = decltype(&ops::hypermlp_read_blocked);

torch::Tensor call(Read read, const Inputs& in, const std::vector<torch::Tensor>& t, const ops::HyperReadOptions& o) {
  size_t i = 3;
  torch::Tensor s1, s2;
  ops::HyperMixing m1, m2;
  if (in.mix_before) s1 = t[i], m1 = {t[i + 1], t[i + 2], t[i + 3]}, i += 4;
  if (in.mix_after) s2 = t[i], m2 = {t[i + 1], t[i + 2], t[i + 3]};
  return read(t[0], t[1], t[2], s1, m1, s2, m2, o);
}

ops::HyperReadOptions options_of(const Case& c) {
  ops::HyperReadOptions o;
  o.activation = c.activation;
  o.layout = c.layout;
  o.block = c.block;
  o.scale = c.activation == HyperActivation::softmax ? 0.6 : 1.0;
  return o;
}

// The output followed by the gradient of every input, for a fixed random upstream gradient.
std::vector<torch::Tensor> run(Read read, const Case& c, torch::ScalarType type) {
  const Inputs in = make_inputs(c);
  std::vector<torch::Tensor> leaves;
  for (const auto& t : in.tensors) leaves.push_back(t.to(type).detach().requires_grad_());
  auto out = call(read, in, leaves, options_of(c));
  out.backward(rnd(out.sizes().vec(), 99).to(type));
  std::vector<torch::Tensor> results{out};
  for (const auto& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

std::vector<std::string> names_of(const Case& c) {
  std::vector<std::string> names = {"out", "dq", "dk", "dv"};
  for (const char* side : {"1", "2"}) {
    if ((side[0] == '1' && !c.mix_before) || (side[0] == '2' && !c.mix_after)) continue;
    for (const char* what : {"ds", "dp", "dU", "dVt"}) names.push_back(std::string(what) + side);
  }
  return names;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (auto activation : {HyperActivation::softmax, HyperActivation::relu, HyperActivation::glu})
    for (auto layout : {HyperLayout::lag, HyperLayout::forward})
      for (auto [before, after] : {std::pair{true, true}, {true, false}, {false, true}, {false, false}})
        for (auto [T, S, block] : {std::tuple{9, 9, 4}, {9, 9, 3}, {9, 9, 1}, {9, 9, 0}, {7, 11, 3}, {1, 12, 5}})
          all.push_back({activation, layout, before, after, T, S, block});
  return all;
}

TEST(HypermlpRead, BlockedEqualsDenseOutputsAndAllGradients) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(describe(c));
    testing::TwinTolerances tol;
    tol.scale_atol = true;
    testing::expect_twins_close(run(&ops::hypermlp_read_dense, c, torch::kDouble),
                                run(&ops::hypermlp_read_blocked, c, torch::kDouble),
                                run(&ops::hypermlp_read_blocked, c, torch::kFloat), names_of(c), tol);
  }
}

TEST(HypermlpRead, OneBlockAndRowBlocksAgreeExactlyEnoughInFp64) {
  // Block size changes only the order of the GEMMs, never which slots a row sees.
  Case c{HyperActivation::glu, HyperLayout::lag, true, true, 10, 10, 0};
  const auto whole = run(&ops::hypermlp_read_blocked, c, torch::kDouble);
  for (int64_t block : {1, 2, 3, 7, 9, 10, 64}) {
    c.block = block;
    EXPECT_CLOSE(run(&ops::hypermlp_read_blocked, c, torch::kDouble)[0], whole[0], 1e-12, 1e-13) << "block " << block;
  }
}

TEST(HypermlpRead, DenseGradientsMatchFiniteDifferences) {
  for (auto activation : {HyperActivation::softmax, HyperActivation::relu, HyperActivation::glu})
    for (auto layout : {HyperLayout::lag, HyperLayout::forward}) {
      const Case c{activation, layout, true, true, 4, 6, 0};
      SCOPED_TRACE(describe(c));
      const Inputs in = make_inputs(c);
      std::vector<torch::Tensor> leaves;
      for (const auto& t : in.tensors) leaves.push_back(t.detach().requires_grad_());
      EXPECT_TRUE(testing::gradcheck(
          [&](const std::vector<torch::Tensor>& t) { return call(&ops::hypermlp_read_dense, in, t, options_of(c)); },
          leaves));
    }
}

TEST(HypermlpRead, RejectsBadArguments) {
  const Case c{HyperActivation::glu, HyperLayout::lag, true, true, 4, 6, 0};
  Inputs in = make_inputs(c);
  auto expect_error = [&](std::vector<torch::Tensor> t, ops::HyperReadOptions o, const std::string& needle) {
    try {
      call(&ops::hypermlp_read_blocked, in, t, o);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto t = in.tensors;
  auto o = options_of(c);
  o.activation = HyperActivation::relu;  // glu's 2H score heads with relu
  expect_error(t, o, "q must have 2 heads");
  t = in.tensors;
  t[1] = rnd({kBatch, kLmax + 1, 2 * kHeads, kQK}, 5);  // more keys than the mixers cover
  t[2] = rnd({kBatch, kLmax + 1, kHeads, kVO}, 6);
  expect_error(t, options_of(c), "exceed the 13");
  t = in.tensors;
  t[5] = rnd({2 * kHeads, kLmax, kRank + 1}, 7);  // U1 of the wrong rank
  expect_error(t, options_of(c), "mixing parameters disagree");
  t = in.tensors;
  t[0] = rnd({kBatch, 7, 2 * kHeads, kQK}, 8);  // more queries than keys
  expect_error(t, options_of(c), "more queries");
}

}  // namespace
}  // namespace seqmix

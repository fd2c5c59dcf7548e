// The contract every sequence mixer keeps, checked for each registered spec in fp64:
// output shape, exact causality, prefill + step-by-step decode equals the full forward, finite-difference
// input gradients, batch 1 and T = 1, packed sequences (cu_seqlens) each mixed as if alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "seqmix/layers/fem.h"
#include "seqmix/models/registry.h"
#include "support/test_support.h"

namespace seqmix {
namespace {

struct MixerCase {
  std::string spec;
  int64_t dim;
};
void PrintTo(const MixerCase& c, std::ostream* os) { *os << c.spec << " (width " << c.dim << ")"; }

std::vector<MixerCase> causal_cases() {
  std::vector<MixerCase> cases = {{"softmax", 16},        {"softmax:rope=0,heads=2", 16}, {"softmax:heads=3", 24}, {"softmax:impl=torch", 16},
          {"relu", 16},
          {"relu:rope=0,heads=1", 12}, {"linear", 16},            {"linear:feature=elu,rope=1", 16},
          {"ela", 16},            {"ela:kernel=sum_sq_euclidean,heads=2", 16},
          {"ela:kernel=sub_sq_euclidean,rope=0,bias=1", 12}, {"ela:kernel=direction_magnitude,heads=3", 18},
          {"ela:impl=naive,scale=0.5", 16}, {"ela:heads=1,rope=0,out=0", 8},
          {"gla", 16},            {"gla:normalize=0,feature=identity", 16}, {"gla:rope=1,feature=elu", 16},
          {"gla:per_key=1", 16},  {"gla:per_key=1,heads=2,normalize=0,feature=identity", 16},
          {"ssm", 12},            {"ssm:conv=0,state=3,expand=1", 10},
          {"delta", 16},          {"delta:heads=2,rope=1,bias=0", 16},
          {"fem:prior=delta", 16}, {"fem:prior=delta,cap=0", 16}, {"fem:prior=delta,flags=C", 16},
          {"fem", 16},            {"fem:prior=linear", 16},   {"fem:prior=gla", 16},
          {"fem:prior=aft", 16},  {"fem:prior=lrnn_decay", 16}, {"fem:prior=ssm,ssm_state=3", 16},
          {"fem:cap=0", 16},      {"fem:prior=gla,cap=0", 16}, {"fem:prior=aft,flags=CL,cap=0", 16},
          {"fem:prior=ssm,flags=LTG,cap=0,ssm_state=2", 16},   {"fem:flags=,prior=linear", 16},
          {"fem:budget=ii,heads=2", 24}, {"fem:flags=CLT,prior=lrnn_decay", 16},
          {"fem:tdc_hidden=4", 16},  {"fem:prior=gla,cap=0,tdc_hidden=4", 16}, {"fem:prior=ssm,tdc_hidden=3", 16},
          {"hypermlp", 384},      {"hyperglu", 384},          {"hypermlp:variant=R-cg-12o!", 16},
          {"hypermlp:variant=R-pcg-12o!,block=3", 16},        {"hypermlp:variant=S-pcg-12o!", 16},
          {"hypermlp:variant=R-12!", 16},                     {"hypermlp:variant=S-pc", 16},
          {"hypermlp:variant=R-c-2o!,path=dense", 16},        {"hyperglu:variant=G-cg-12o!,block=4", 16},
          {"hyperglu:variant=G-p-1o!", 16},                   {"hyperglu:variant=G-cg-12!", 16},
          {"mha2nd1st", 16},      {"mha2nd1st:rope=0,heads=4,bias_temperature=divisor", 16},
          {"light2nd1st", 16},    {"light2nd1st:rope=0,heads=4,tau=0.5", 16},
          {"energy", 8},          {"energy:local=abs_inner,global=neg_sum_squares,heads=2", 8},
          {"energy:global=gated_sum_squares,local=half_sq_distance,optimizer=momentum,steps=2", 8},
          {"energy:local=huber,optimizer=nesterov,steps=2,delta=0.5", 8},
          {"energy:local=lp,p=3,heads=2", 8},
          {"energy:local=half_sq_distance,optimizer=newton_taylor,steps=2,heads=2", 8}};
  // FEM on every registered prior, so a new prior keeps the contract without a line here.
  for (const auto& prior : fem_prior_names()) {
    const std::string spec = "fem:prior=" + prior;
    if (std::none_of(cases.begin(), cases.end(), [&](const MixerCase& c) { return c.spec == spec; }))
      cases.push_back({spec, 16});
  }
  cases.push_back({"fem:prior=ema,ema_half_life=4,cap=0", 16});
  return cases;
}

std::vector<MixerCase> bidirectional_cases() {
  return {{"softmax:causal=0", 16}, {"softmax:causal=0,impl=torch", 16}, {"relu:causal=0", 16},  {"linear:causal=0", 16},
          {"ela:causal=0", 16},     {"ela:causal=0,kernel=direction_magnitude,impl=naive", 16},
          {"fem:causal=0", 16},     {"fem:prior=linear,causal=0,cap=0", 16},
          {"mha2nd1st:causal=0", 16}, {"light2nd1st:causal=0", 16}};
}

Mixer make(const MixerCase& c) {
  torch::manual_seed(7);
  auto m = build_mixer(c.spec, MixerContext{c.dim, 64});
  m->to(torch::kDouble);
  // Larger weights than the N(0, 0.02) init, so every path carries signal in the comparisons.
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters()) {
    if (p.dim() < 2) continue;
    if (p.abs().max().item<double>() == 0) p.normal_(0, 0.5);  // zero-initialised projections (FEM's conditioner)
    else p.mul_(10.0);
  }
  return m;
}

torch::Tensor input(int64_t B, int64_t T, int64_t D, uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn({B, T, D}, g, torch::kDouble);
}

// forward_packed over sequences of lengths 3, 1, 0, 9, 5 equals forward on each alone, outputs and input gradients
// (the mixers that pack natively make one kernel call; the others run forward per sequence).
void expect_packed_equals_each_alone(const MixerCase& c) {
  auto m = make(c);
  const std::vector<int64_t> lengths{3, 1, 0, 9, 5};
  std::vector<int64_t> offsets{0};
  for (int64_t n : lengths) offsets.push_back(offsets.back() + n);
  const auto x = input(1, offsets.back(), c.dim, 8).requires_grad_();
  const auto weights = input(1, offsets.back(), c.dim, 9);
  const auto packed = m->forward_packed(x, torch::tensor(offsets, torch::kLong));
  ASSERT_EQ(packed.sizes(), x.sizes());
  const auto packed_grad = torch::autograd::grad({(packed * weights).sum()}, {x})[0];
  std::vector<torch::Tensor> alone;
  for (size_t s = 0; s < lengths.size(); ++s)
    if (lengths[s] > 0) alone.push_back(m->forward(x.narrow(1, offsets[s], lengths[s])));
  const auto each = torch::cat(alone, 1);
  const auto each_grad = torch::autograd::grad({(each * weights).sum()}, {x})[0];
  EXPECT_CLOSE(packed, each, 1e-10, 1e-12);
  EXPECT_CLOSE(packed_grad, each_grad, 1e-10, 1e-12);
  EXPECT_THROW(m->forward_packed(x, torch::tensor(std::vector<int64_t>{0, 4, 3, offsets.back()}, torch::kLong)),
               std::exception);  // decreasing offsets
  EXPECT_THROW(m->forward_packed(x, torch::tensor(std::vector<int64_t>{0, 5}, torch::kLong)), std::exception);
}

class CausalMixer : public ::testing::TestWithParam<MixerCase> {};

TEST_P(CausalMixer, PackedSequencesEqualEachAlone) { expect_packed_equals_each_alone(GetParam()); }

TEST_P(CausalMixer, ShapeAndFlags) {
  auto m = make(GetParam());
  EXPECT_TRUE(m->is_causal());
  for (int64_t B : {1, 3})
    for (int64_t T : {1, 2, 9}) EXPECT_EQ(m->forward(input(B, T, GetParam().dim, 1)).sizes(), (at::IntArrayRef{B, T, GetParam().dim}));
}

TEST_P(CausalMixer, PerturbingTokenTLeavesEarlierOutputsBitIdentical) {
  auto m = make(GetParam());
  const int64_t T = 11;
  auto x = input(2, T, GetParam().dim, 2);
  auto y = m->forward(x);
  for (int64_t t : {1, 4, 10}) {
    auto x2 = x.clone();
    x2.select(1, t).add_(input(2, 1, GetParam().dim, 100 + t).squeeze(1) * 3.0);
    auto y2 = m->forward(x2);
    EXPECT_TRUE(torch::equal(y.narrow(1, 0, t), y2.narrow(1, 0, t))) << "output before " << t << " changed";
    EXPECT_FALSE(torch::equal(y.narrow(1, t, T - t), y2.narrow(1, t, T - t))) << "token " << t << " had no effect";
  }
}

// A NaN or inf at token t reaches no output before t (the ops recompute the outputs before a non-finite key from
// the finite prefix, src/ops/common/padding.h): the earlier outputs stay those of the clean input, and finite.
TEST_P(CausalMixer, NonFiniteTokenTLeavesEarlierOutputsAlone) {
  auto m = make(GetParam());
  torch::NoGradGuard no_grad;
  const int64_t T = 11;
  const auto x = input(2, T, GetParam().dim, 2);
  const auto y = m->forward(x);
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    for (int64_t t : {1, 4, 10}) {
      auto x2 = x.clone();
      x2.select(1, t).select(0, 1).fill_(bad);  // row 1 only; row 0 stays clean throughout
      const auto y2 = m->forward(x2);
      EXPECT_TRUE(torch::isfinite(y2.narrow(1, 0, t)).all().item<bool>()) << "token " << t << " = " << bad;
      EXPECT_CLOSE(y2.narrow(1, 0, t), y.narrow(1, 0, t), 1e-12, 1e-12) << "token " << t << " = " << bad;
      EXPECT_CLOSE(y2.select(0, 0), y.select(0, 0), 1e-12, 1e-12) << "the other row, token " << t << " = " << bad;
    }
}

TEST_P(CausalMixer, PrefillThenStepsEqualsForward) {
  auto m = make(GetParam());
  torch::NoGradGuard no_grad;
  const int64_t T = 10;
  for (int64_t B : {1, 2}) {
    auto x = input(B, T, GetParam().dim, 3);
    auto full = m->forward(x);
    for (int64_t prefix : {0, 1, 4}) {
      auto state = m->init_state(B);
      std::vector<torch::Tensor> ys;
      if (prefix > 0) ys.push_back(m->prefill(x.narrow(1, 0, prefix), state));
      for (int64_t t = prefix; t < T; ++t) ys.push_back(m->step(x.select(1, t), state).unsqueeze(1));
      EXPECT_EQ(state.position, T);
      EXPECT_CLOSE(torch::cat(ys, 1), full, 1e-10, 1e-12) << "prefix " << prefix << ", batch " << B;
    }
  }
}

TEST_P(CausalMixer, FiniteDifferenceInputGradients) {
  auto m = make(GetParam());
  auto x = input(1, 5, GetParam().dim, 4).requires_grad_();
  EXPECT_TRUE(testing::gradcheck([&](const std::vector<torch::Tensor>& v) { return m->forward(v[0]); }, {x}, 1e-6,
                                 1e-5, 1e-7, 40));
}

TEST_P(CausalMixer, StepRejectsWrongShapes) {
  auto m = make(GetParam());
  auto state = m->init_state(2);
  EXPECT_THROW(m->step(torch::zeros({2, GetParam().dim + 1}, torch::kDouble), state), std::exception);
  EXPECT_THROW(m->forward(torch::zeros({2, 3, GetParam().dim + 1}, torch::kDouble)), std::exception);
}

INSTANTIATE_TEST_SUITE_P(Registry, CausalMixer, ::testing::ValuesIn(causal_cases()),
                         [](const ::testing::TestParamInfo<MixerCase>& info) {
                           std::string n = info.param.spec;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

class BidirectionalMixer : public ::testing::TestWithParam<MixerCase> {};

TEST_P(BidirectionalMixer, PackedSequencesEqualEachAlone) { expect_packed_equals_each_alone(GetParam()); }

TEST_P(BidirectionalMixer, SeesTheFutureAndRefusesToDecode) {
  auto m = make(GetParam());
  EXPECT_FALSE(m->is_causal());
  auto x = input(1, 6, GetParam().dim, 5);
  auto y = m->forward(x);
  EXPECT_EQ(y.sizes(), x.sizes());
  auto x2 = x.clone();
  x2.select(1, 5).add_(1.0);
  EXPECT_FALSE(torch::equal(y.select(1, 0), m->forward(x2).select(1, 0)));
  EXPECT_THROW(m->init_state(1), std::exception);
  auto xg = input(1, 4, GetParam().dim, 6).requires_grad_();
  EXPECT_TRUE(testing::gradcheck([&](const std::vector<torch::Tensor>& v) { return m->forward(v[0]); }, {xg}, 1e-6,
                                 1e-5, 1e-7, 40));
}

INSTANTIATE_TEST_SUITE_P(Registry, BidirectionalMixer, ::testing::ValuesIn(bidirectional_cases()),
                         [](const ::testing::TestParamInfo<MixerCase>& info) {
                           std::string n = info.param.spec;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace seqmix

namespace seqmix {
namespace {

TEST(MixerContract, TheAttentionAndLinearStateMixersPackNatively) {
  for (const std::string spec : {"softmax", "softmax:causal=0", "linear", "linear:causal=0", "gla", "gla:per_key=1"})
    EXPECT_TRUE(build_mixer(spec, MixerContext{16, 64})->packs_natively()) << spec;
  for (const std::string spec : {"relu", "fem", "ela", "ssm", "delta"})
    EXPECT_FALSE(build_mixer(spec, MixerContext{16, 64})->packs_natively()) << spec;
}

TEST(MixerContract, EveryRegisteredMixerHasACausalCase) {
  for (const auto& info : mixer_infos()) {
    bool covered = false;
    for (const auto& c : causal_cases()) covered = covered || Spec::parse(c.spec).name == info.name;
    EXPECT_TRUE(covered) << "mixer " << info.name << " is not in the contract test's cases";
  }
}

}  // namespace
}  // namespace seqmix

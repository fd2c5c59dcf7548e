#include <gtest/gtest.h>

#include "seqmix/io/error.h"
#include <algorithm>

#include "seqmix/models/language_model.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/modules/mixture_of_experts.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/task.h"
#include "support/error_of.h"

namespace seqmix {
namespace {

using seqmix::testing::error_of;

TEST(Registry, EveryListedMixerBuildsWithItsDefaults) {
  for (const auto& info : mixer_infos()) {
    SCOPED_TRACE(info.name);
    auto m = build_mixer(info.name, MixerContext{384, 16});
    EXPECT_EQ(m->forward(torch::randn({2, 5, 384})).sizes(), (at::IntArrayRef{2, 5, 384}));
    EXPECT_FALSE(info.meaning.empty());
    for (const auto& o : info.options) EXPECT_FALSE(o.meaning.empty()) << o.key;
  }
}

TEST(Registry, EveryListedMixerBuildsWithItsDefaultsAtAnyWidthAndLength) {
  // A researcher's first try builds: HyperMLP's matched budget picks the mixing rank that fits (or says it is over).
  torch::NoGradGuard no_grad;
  for (const auto& info : mixer_infos())
    for (int64_t dim : {32, 64, 128, 256, 768})
      for (int64_t max_len : {16, 128, 1024, 4096}) {
        SCOPED_TRACE(info.name + " at width " + std::to_string(dim) + ", max_len " + std::to_string(max_len));
        Mixer m;
        EXPECT_NO_THROW(m = build_mixer(info.name, MixerContext{dim, max_len}));
        if (m) EXPECT_EQ(m->forward(torch::randn({1, 3, dim})).sizes(), (at::IntArrayRef{1, 3, dim}));
      }
}

TEST(Registry, OnlyTheMixersWithARawValueReadTakeTheProbesContext) {
  // The probe model asks for raw values (no value or output projection); softmax, relu and fem have that path (their
  // options' raw_values, which make_layer sets), every other mixer refuses in one line naming it. Every one takes a
  // plain context.
  torch::NoGradGuard no_grad;
  const std::vector<std::string> reading = {"softmax", "relu", "fem"};
  for (const auto& info : mixer_infos()) {
    SCOPED_TRACE(info.name);
    MixerContext probe{16, 8};
    probe.raw_values = true;
    if (std::find(reading.begin(), reading.end(), info.name) != reading.end()) {
      // (Its defaults may not fit the probe's width otherwise: that is another error.)
      EXPECT_EQ(error_of([&] { build_mixer(info.name, probe); }).find("cannot read raw values"), std::string::npos);
    } else {
      EXPECT_EQ(error_of([&] { build_mixer(info.name, probe); }),
                "mixer " + info.name + " cannot read raw values (the probe model needs softmax, relu or fem)");
    }
    EXPECT_NO_THROW(build_mixer(info.name, MixerContext{16, 8}));
  }
}

TEST(Registry, MixerSpecsAreParsedByTheOneSpecParser) {
  // parse_mixer_spec is parse_spec over the mixers' declarations, as every kind's specs are: the same resolved text
  // and the same errors.
  const MixerSpec spec = parse_mixer_spec("gla:heads=2");
  const auto direct = parse_spec(mixer_declarations(), "mixer", "gla:heads=2");
  EXPECT_EQ(spec.text, direct.text);
  EXPECT_EQ(spec.text, resolve_mixer_spec("gla:heads=2"));
  EXPECT_EQ(spec.source, "gla:heads=2");
  EXPECT_EQ(spec.name(), "gla");
  EXPECT_EQ(error_of([] { parse_mixer_spec("gla:hedas=2"); }),
            error_of([] { parse_spec(mixer_declarations(), "mixer", "gla:hedas=2"); }));
}

TEST(Registry, ResolvedSpecsBuildTheSameMixer) {
  // A run's config.yaml holds the resolved spec (every option spelled out); building from it must neither
  // fail nor change the mixer. (fem:cap=0 once failed this way: its resolved impl= looked explicit.)
  for (const std::string spec : {"fem:cap=0", "fem:prior=gla,cap=0", "hypermlp:variant=R-pc", "hyperglu:variant=G-c-12o!",
                                 "hypermlp:variant=S", "softmax:heads=2", "ssm"}) {
    SCOPED_TRACE(spec);
    const std::string resolved = resolve_mixer_spec(spec);
    torch::manual_seed(1);
    auto a = build_mixer(spec, MixerContext{384, 16});
    torch::manual_seed(1);
    auto b = build_mixer(resolved, MixerContext{384, 16});
    auto x = torch::randn({1, 6, 384});
    EXPECT_TRUE(torch::equal(a->forward(x), b->forward(x)));
  }
}

TEST(Registry, EveryChannelMixerAndResidualBuilds) {
  for (const auto& info : channel_mixer_infos()) {
    auto c = build_channel_mixer(info.name, 16);
    if (info.name == "none") EXPECT_EQ(c, nullptr);
    else EXPECT_EQ(c->forward(torch::randn({2, 3, 16})).sizes(), (at::IntArrayRef{2, 3, 16}));
  }
  for (const auto& info : residual_infos()) EXPECT_NE(build_residual(info.name, 2), nullptr);
}

TEST(Registry, UnknownNamesAndKeysAreNamedWithTheValidOnes) {
  const std::string name = error_of([] { build_mixer("sofmax", MixerContext{}); });
  EXPECT_NE(name.find("unknown mixer 'sofmax'"), std::string::npos) << name;
  EXPECT_NE(name.find("softmax, relu, linear, ela, gla, ssm"), std::string::npos) << name;
  const std::string key = error_of([] { build_mixer("softmax:head=2", MixerContext{}); });
  EXPECT_NE(key.find("mixer softmax has no option 'head'"), std::string::npos) << key;
  EXPECT_NE(key.find("heads"), std::string::npos) << key;
  EXPECT_NE(error_of([] { build_channel_mixer("glu", 8); }).find("unknown channel mixer 'glu'"), std::string::npos);
  EXPECT_NE(error_of([] { build_task("mad.recall"); }).find("unknown task 'mad.recall'"), std::string::npos);
  EXPECT_NE(error_of([] { build_mixer("softmax:heads=5", MixerContext{32, 0}); }).find("not divisible"),
            std::string::npos);
  EXPECT_NE(error_of([] { build_mixer("gla:feature=identity", MixerContext{32, 0}); }).find("positive feature map"),
            std::string::npos);
  LanguageModelOptions o;
  EXPECT_NE(error_of([&] { apply_model_spec("lm:width=3", o); }).find("'width'"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_model_spec("gpt", o); }).find("unknown model 'gpt'"), std::string::npos);
}

// A spec inside a spec is parsed with it, once, and held typed: a model's channel mixer and residual scheme.
TEST(Registry, NestedSpecsAreParsedWithTheirModelAndHeldTyped) {
  const ModelSpec model("lm:dim=16,channel=(moe:experts=3),residual=(hyperlink:lobe=causal)");
  const auto& o = std::any_cast<const LanguageModelOptions&>(model.options);
  EXPECT_EQ(o.dim, 16);
  EXPECT_EQ(o.channel_mixer.name(), "moe");
  EXPECT_EQ(std::any_cast<const MixtureOfExpertsOptions&>(o.channel_mixer.options).experts, 3);
  EXPECT_EQ(o.residual.name(), "hyperlink");
  EXPECT_EQ(std::any_cast<const HyperLinkOptions&>(o.residual.options).lobe, "causal");
  // A bad nested option is an error of the model spec, naming the inner component and option.
  const std::string bad = error_of([] { ModelSpec("lm:channel=(moe:experts=0)"); });
  EXPECT_NE(bad.find("channel mixer moe"), std::string::npos) << bad;
  EXPECT_NE(bad.find("experts"), std::string::npos) << bad;
  // The defaults `seqmix list` shows are the options structs' own.
  const auto& vit = *std::find_if(model_infos().begin(), model_infos().end(), [](const auto& i) { return i.name == "vit"; });
  for (const auto& option : vit.options) {
    if (option.key == "channel") EXPECT_EQ(option.default_value, "mlp");
    if (option.key == "norm") EXPECT_EQ(option.default_value, "layer");
    if (option.key == "layers") EXPECT_EQ(option.default_value, "4");
  }
}

// A task variant's defaults are its options struct's own (noisy recall: a larger vocabulary, a fifth noise).
TEST(Registry, TaskSpecsResolveToTheirStructsDefaults) {
  EXPECT_EQ(TaskSpec("mad.noisy_recall").text,
            "mad.noisy_recall:vocab_size=32,seq_len=128,num_train=12800,num_test=1280,noise_vocab_size=16,"
            "frac_noise=0.2,multi_query=1,seed=12345");
  EXPECT_EQ(TaskSpec("mad.in_context_recall:seq_len=64").text,
            "mad.in_context_recall:vocab_size=16,seq_len=64,num_train=12800,num_test=1280,noise_vocab_size=0,"
            "frac_noise=0,multi_query=1,seed=12345");
}

TEST(Registry, ResolvedSpecSpellsOutDefaults) {
  EXPECT_EQ(resolve_mixer_spec("softmax:heads=2"),
            "softmax:heads=2,rope=1,rope_theta=10000,bias=1,causal=1,scale=0,impl=auto");
}

}  // namespace
}  // namespace seqmix

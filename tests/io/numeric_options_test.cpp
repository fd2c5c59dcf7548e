// Every registered numeric option (the integer and real options of every mixer, channel mixer, residual scheme,
// model and task) fed NaN, inf, -inf, 0 and a huge value: the component either builds (and a mixer or channel
// mixer runs a forward) or refuses with one seqmix::Error that names the option; never another exception (an
// allocation beyond memory, a LibTorch error about a negative size) and never a crash. NaN and infinities mean
// nothing to any seqmix option (the spec parser reads a number as finite, src/io/spec.cpp), so for them only the
// refusal passes: an option that starts taking one fails here. The command line's numeric
// flags and config keys are swept the same way by tests/cli/numeric_options_sweep.sh, which also checks that a
// refused run leaves no run folder.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"
#include "seqmix/models/model_factory.h"
#include "seqmix/models/registry.h"
#include "seqmix/tasks/task.h"

namespace seqmix {
namespace {

const char* kValues[] = {"nan", "inf", "-inf", "0", "1e300", "9223372036854775807"};
bool is_nonfinite(const std::string& value) { return value == "nan" || value == "inf" || value == "-inf"; }

struct Sweep {
  int options = 0, cases = 0;
  std::vector<std::string> failures;
};

// Builds `spec` with build(); a seqmix::Error must name `key`. With must_refuse, building is a failure too.
void expect_built_or_named(Sweep& sweep, const std::string& spec, const std::string& key,
                           const std::function<void(const std::string&)>& build, bool must_refuse) {
  ++sweep.cases;
  try {
    build(spec);
    if (must_refuse) sweep.failures.push_back(spec + ": taken, but NaN and infinities mean nothing to " + key);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(key) == std::string::npos) sweep.failures.push_back(spec + ": an error that does not name " + key + ": " + what);
    if (what.find('\n') != std::string::npos) sweep.failures.push_back(spec + ": an error of several lines: " + what);
  } catch (const std::exception& e) {
    sweep.failures.push_back(spec + ": not a seqmix error: " + std::string(e.what()).substr(0, 300));
  }
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

void sweep_components(Sweep& sweep, const std::vector<ComponentInfo>& infos,
                      const std::function<void(const std::string&)>& build, const std::string& base_options = "") {
  for (const auto& info : infos)
    for (const auto& option : info.options) {
      if (option.type != OptionType::Integer && option.type != OptionType::Real) continue;
      ++sweep.options;
      std::string base;  // the base options but the swept one
      for (const auto& item : split_list(base_options))
        if (item.rfind(option.key + "=", 0) != 0) base += item + ",";
      for (const char* value : kValues) {
        const std::string spec = info.name + ":" + base + option.key + "=" + value;
        expect_built_or_named(sweep, spec, option.key, build, is_nonfinite(value));
      }
    }
}

std::string report(const Sweep& s) {
  std::string r = std::to_string(s.options) + " options, " + std::to_string(s.cases) + " cases, " +
                  std::to_string(s.failures.size()) + " failed";
  for (const auto& f : s.failures) r += "\n  " + f;
  return r;
}

TEST(NumericOptions, EveryMixerOptionBuildsOrNamesTheOption) {
  Sweep sweep;
  torch::NoGradGuard no_grad;
  sweep_components(sweep, mixer_infos(), [](const std::string& spec) {
    auto m = build_mixer(spec, MixerContext{32, 16});
    m->forward(torch::randn({1, 4, 32}));
  });
  std::printf("mixers: %s\n", report(sweep).c_str());
  EXPECT_TRUE(sweep.failures.empty()) << report(sweep);
}

TEST(NumericOptions, EveryChannelMixerResidualAndModelOptionBuildsOrNamesTheOption) {
  Sweep sweep;
  torch::NoGradGuard no_grad;
  sweep_components(sweep, channel_mixer_infos(), [](const std::string& spec) {
    if (auto c = build_channel_mixer(spec, 32)) c->forward(torch::randn({1, 4, 32}));
  });
  sweep_components(sweep, residual_infos(), [](const std::string& spec) { build_residual(spec, 2); });
  sweep_components(sweep, model_infos(), [](const std::string& spec) {
    ModelContext c;
    const std::string name = Spec::parse(spec).name;
    const bool tokens = name == "lm" || name == "autoencoder";
    c.vocab_size = tokens ? 16 : 0;
    c.input_features = tokens ? 0 : 4;
    c.output_features = name == "vit" ? 10 : 4;
    c.seq_len = 16;
    c.output_len = name == "forecaster" || name == "dlinear" ? 4 : 0;
    if (model_takes_mixers(spec))
      c.mixers = {parse_mixer_spec(name == "vit" ? "softmax:heads=2,causal=0" : "softmax:heads=2")};
    build_model(spec, c);
  });
  std::printf("channel mixers, residuals, models: %s\n", report(sweep).c_str());
  EXPECT_TRUE(sweep.failures.empty()) << report(sweep);
}

TEST(NumericOptions, EveryTaskOptionBuildsOrNamesTheOption) {
  const std::string ett = (std::filesystem::path(__FILE__).parent_path().parent_path() / "data/ett_tiny.csv").string();
  // Small tasks, so that what a value leaves as it is builds fast.
  const std::map<std::string, std::string> small = {
      {"ett", "path=" + ett + ",input_len=8,horizon=2,train_rows=20,val_rows=5,test_rows=5,"},
      {"text", "path=" + ett + ",seq_len=8,vocab_size=300,num_test=4,"},
      {"fashion_mnist", "num_train=8,num_val=4,"},
      {"argmax", "num_train=8,num_test=4,seq_len=8,dim=4,"}};
  Sweep sweep;
  for (const auto& info : task_infos()) {
    const auto found = small.find(info.name);
    const std::string base = found != small.end() ? found->second : "num_train=8,num_test=4,";
    sweep_components(sweep, {info}, [](const std::string& spec) { build_task(spec)->test_set(); }, base);
  }
  std::printf("tasks: %s\n", report(sweep).c_str());
  EXPECT_TRUE(sweep.failures.empty()) << report(sweep);
}

}  // namespace
}  // namespace seqmix

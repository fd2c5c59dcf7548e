// Schedule, checkpoints and resume: a run interrupted and resumed ends bit for bit where an
// uninterrupted run ends; corrupt checkpoints are clear errors that change nothing on disk.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"
#include "seqmix/models/language_model.h"
#include "seqmix/tasks/mad/recall.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/schedule.h"
#include "seqmix/train/trainer.h"
#include "seqmix/train/progress.h"
#include "support/error_of.h"

namespace seqmix {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("seqmix-train-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  return dir;
}

std::shared_ptr<LanguageModelImpl> tiny_model(uint64_t seed) {
  torch::manual_seed(seed);
  LanguageModelOptions o;
  o.vocab_size = 16;
  o.dim = 16;
  o.layers = 2;
  o.mixers = {"softmax:heads=2", "gla:heads=2"};
  return std::make_shared<LanguageModelImpl>(o);
}

RecallTask tiny_task() { return RecallTask("mad.in_context_recall", RecallOptions{16, 16, 64, 16}, "tiny"); }

TrainConfig tiny_config(const fs::path& dir, int64_t steps) {
  TrainConfig c;
  c.steps = steps;
  c.batch_size = 8;
  c.optimizer.lr = 1e-2;
  c.warmup_steps = 2;
  c.eval_every = 4;
  c.checkpoint_every = 5;
  c.log_every = 3;
  c.keep_checkpoints = 2;
  c.out_dir = dir.string();
  c.quiet = true;
  return c;
}

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().string()] = read_file(e.path().string());
  return files;
}

using seqmix::testing::error_of;

// The ETA counts the evaluations still to come at their measured mean time, once one has run.
TEST(Progress, EtaCountsTheEvaluationsToCome) {
  // Evaluations at 100, 200, ..., 1000 (every 100) and none extra at 1000; every 300 of 1000: 300, 600, 900, 1000.
  EXPECT_EQ(Progress::evaluations_after(0, 1000, 100), 10);
  EXPECT_EQ(Progress::evaluations_after(250, 1000, 100), 8);
  EXPECT_EQ(Progress::evaluations_after(0, 1000, 300), 4);
  EXPECT_EQ(Progress::evaluations_after(950, 1000, 300), 1);
  EXPECT_EQ(Progress::evaluations_after(10, 1000, 0), 1);
  EXPECT_EQ(Progress::evaluations_after(1000, 1000, 100), 0);
  // 200 steps took 40 s of training and 2 evaluations 10 s: 800 steps and 8 evaluations left.
  EXPECT_DOUBLE_EQ(Progress::eta_seconds(40.0, 200, 800, 10.0, 2, 8), 160.0 + 40.0);
  EXPECT_DOUBLE_EQ(Progress::eta_seconds(40.0, 200, 800, 0.0, 0, 8), 160.0);  // no evaluation measured yet
  EXPECT_TRUE(std::isnan(Progress::eta_seconds(0.0, 0, 800, 0.0, 0, 8)));
}

TEST(Schedule, WarmupCosineAndStages) {
  Schedule s{1.0, 0.1, 4, 14};
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 1.0);
  EXPECT_NEAR(s.lr_at(9), 0.1 + 0.45 * (1 + std::cos(M_PI * 0.5)), 1e-12);
  EXPECT_NEAR(s.lr_at(14), 0.1, 1e-12);
  Schedule staged{1.0, 0.0, 0, 10, 5};
  EXPECT_DOUBLE_EQ(staged.lr_at(3), staged.lr_at(0));
  EXPECT_DOUBLE_EQ(staged.lr_at(7), staged.lr_at(5));
  EXPECT_NEAR(staged.lr_at(5), 0.5, 1e-12);
}

TEST(Checkpoint, ResumeAfterAnInterruptionEndsBitIdentical) {
  at::set_num_threads(1);
  auto task = tiny_task();
  const auto dir_a = fresh_dir("uninterrupted"), dir_b = fresh_dir("interrupted");
  auto a = tiny_model(3);
  train(*a, task, tiny_config(dir_a, 13));

  auto b = tiny_model(3);
  TrainConfig interrupted = tiny_config(dir_b, 13);
  interrupted.after_step = [](int64_t step) {
    if (step == 8) throw std::runtime_error("simulated crash");
  };
  EXPECT_THROW(train(*b, task, interrupted), std::runtime_error);
  EXPECT_EQ(list_checkpoints(dir_b.string()), (std::vector<int64_t>{5}));

  auto c = tiny_model(99);  // different initial weights: everything must come from the checkpoint
  TrainConfig resumed = tiny_config(dir_b, 13);
  resumed.resume = true;
  const TrainSummary s = train(*c, task, resumed);
  EXPECT_EQ(s.steps_done, 13);
  auto pa = a->named_parameters(), pc = c->named_parameters();
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pc[p.key()])) << p.key();
  // Logs are identical too: the interrupted run's lines after its checkpoint were replaced.
  EXPECT_EQ(read_file((dir_a / "metrics.jsonl").string()).size() > 0, true);
  // Their losses too: the checkpoint (step 5) falls inside a log interval (3), which the resume continues.
  auto steps_of = [](const fs::path& log) {
    std::vector<std::tuple<int64_t, std::string, double>> v;
    std::istringstream in(read_file(log.string()));
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      v.emplace_back(j["step"].get<int64_t>(), j["split"].get<std::string>(), j["loss"].get<double>());
    }
    return v;
  };
  EXPECT_EQ(steps_of(dir_a / "metrics.jsonl"), steps_of(dir_b / "metrics.jsonl"));
  // keep_checkpoints = 2: steps 10 and 13 remain.
  EXPECT_EQ(list_checkpoints(dir_b.string()), (std::vector<int64_t>{10, 13}));
}

TEST(Checkpoint, RoundTripRestoresModelAndOptimizerExactly) {
  auto task = tiny_task();
  const auto dir = fresh_dir("roundtrip");
  auto m = tiny_model(4);
  train(*m, task, tiny_config(dir, 5));
  auto fresh = tiny_model(5);
  auto opt = make_adamw(*fresh, OptimizerConfig{});
  TrainerState state;
  ASSERT_TRUE(load_checkpoint(dir.string(), *fresh, opt.get(), state));
  EXPECT_EQ(state.step, 5);
  EXPECT_FALSE(state.final_metrics.empty());
  auto pm = m->named_parameters();
  for (const auto& p : fresh->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), pm[p.key()])) << p.key();
  int with_state = 0;
  for (const auto& p : fresh->parameters()) {
    auto it = opt->state().find(static_cast<void*>(p.unsafeGetTensorImpl()));
    if (it == opt->state().end()) continue;
    ++with_state;
    EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*it->second).step(), 5);
  }
  EXPECT_EQ(with_state, static_cast<int>(fresh->parameters().size()));
}

// AdamW's moment of parameter p in optimizer opt.
const torch::optim::AdamWParamState& adam_state(torch::optim::AdamW& opt, const torch::Tensor& p) {
  return static_cast<const torch::optim::AdamWParamState&>(*opt.state().at(static_cast<void*>(p.unsafeGetTensorImpl())));
}

TEST(Checkpoint, RoundTripRestoresAdamMomentsBitForBit) {
  auto task = tiny_task();
  const auto dir = fresh_dir("moments");
  fs::create_directories(dir);
  auto m = tiny_model(6);
  auto opt = make_adamw(*m, OptimizerConfig{});
  for (int64_t step = 0; step < 3; ++step) {
    opt->zero_grad();
    Batch b = task.train_batch(step, 4);
    task.loss(m->forward(b.inputs), b).backward();
    opt->step();
  }
  TrainerState state;
  state.step = 3;
  save_checkpoint(dir.string(), *m, *opt, state, 1);
  auto fresh = tiny_model(7);
  auto fresh_opt = make_adamw(*fresh, OptimizerConfig{});
  TrainerState loaded;
  ASSERT_TRUE(load_checkpoint(dir.string(), *fresh, fresh_opt.get(), loaded));
  const auto params = m->parameters(), fresh_params = fresh->parameters();
  ASSERT_EQ(params.size(), fresh_params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& a = adam_state(*opt, params[i]);
    const auto& b = adam_state(*fresh_opt, fresh_params[i]);
    EXPECT_TRUE(torch::equal(a.exp_avg(), b.exp_avg())) << i;
    EXPECT_TRUE(torch::equal(a.exp_avg_sq(), b.exp_avg_sq())) << i;
    EXPECT_EQ(a.step(), b.step());
  }
}

TEST(Optimizer, DecayGroupsSpareNormsAndBiases) {
  auto m = tiny_model(1);
  OptimizerConfig c;
  c.weight_decay = 0.25;
  auto opt = make_adamw(*m, c);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  auto decay_of = [](torch::optim::OptimizerParamGroup& g) {
    return static_cast<torch::optim::AdamWOptions&>(g.options()).weight_decay();
  };
  EXPECT_EQ(decay_of(opt->param_groups()[0]), 0.25);
  EXPECT_EQ(decay_of(opt->param_groups()[1]), 0.0);
  std::set<const void*> decayed, spared;
  for (const auto& p : opt->param_groups()[0].params()) decayed.insert(p.unsafeGetTensorImpl());
  for (const auto& p : opt->param_groups()[1].params()) spared.insert(p.unsafeGetTensorImpl());
  int norms = 0, biases = 0;
  for (const auto& p : m->named_parameters()) {
    const bool vector = p.value().dim() < 2;
    const std::string& name = p.key();
    if (name.find("norm") != std::string::npos && vector) ++norms;
    if (name.find("bias") != std::string::npos) ++biases;
    EXPECT_EQ(decayed.count(p.value().unsafeGetTensorImpl()), vector ? 0u : 1u) << name;
    EXPECT_EQ(spared.count(p.value().unsafeGetTensorImpl()), vector ? 1u : 0u) << name;
  }
  EXPECT_GT(norms, 0);
  EXPECT_GT(biases, 0);  // the head's bias
  c.decay_vectors = true;  // MAD: one group, everything decays
  auto all = make_adamw(*m, c);
  EXPECT_EQ(all->param_groups()[0].params().size(), m->parameters().size());
  EXPECT_TRUE(all->param_groups()[1].params().empty());
}

TEST(Trainer, ClippingScalesTheGradientToTheLimit) {
  // After one AdamW step exp_avg = (1 - beta1) * g, so the stored moment shows the gradient that was used.
  auto task = tiny_task();
  auto first_moment = [&](const std::string& name, double clip, double* logged_norm) {
    const auto dir = fresh_dir(name);
    auto m = tiny_model(9);
    TrainConfig c = tiny_config(dir, 1);
    c.grad_clip = clip;
    train(*m, task, c);
    std::ifstream log(dir / "metrics.jsonl");
    std::string line;
    std::getline(log, line);
    *logged_norm = nlohmann::json::parse(line).at("grad_norm").get<double>();
    auto fresh = tiny_model(9);
    auto opt = make_adamw(*fresh, OptimizerConfig{});
    TrainerState state;
    EXPECT_TRUE(load_checkpoint(dir.string(), *fresh, opt.get(), state));
    std::vector<torch::Tensor> moments;
    for (const auto& p : fresh->parameters()) moments.push_back(adam_state(*opt, p).exp_avg().flatten());
    return torch::cat(moments).to(torch::kDouble);
  };
  double norm = 0, clipped_norm = 0;
  const auto unclipped = first_moment("noclip", 0.0, &norm);
  EXPECT_NEAR(unclipped.norm().item<double>(), 0.1 * norm, 1e-5 * norm);
  const double limit = norm / 10;
  const auto clipped = first_moment("clip", limit, &clipped_norm);
  EXPECT_DOUBLE_EQ(clipped_norm, norm);  // the log shows the norm before clipping
  EXPECT_NEAR(clipped.norm().item<double>(), 0.1 * limit, 1e-4 * limit);
  EXPECT_TRUE(torch::allclose(clipped * 10, unclipped, 1e-4, 1e-9));  // same direction, scaled
}

TEST(Checkpoint, CorruptOrTruncatedCheckpointsAreClearErrorsAndChangeNothing) {
  auto task = tiny_task();
  const auto dir = fresh_dir("corrupt");
  auto m = tiny_model(6);
  train(*m, task, tiny_config(dir, 5));
  const fs::path tensors = dir / "checkpoints" / "step-00000005.safetensors";
  const fs::path record = dir / "checkpoints" / "step-00000005.json";
  const std::string good_tensors = read_file(tensors.string()), good_record = read_file(record.string());

  auto expect_error = [&](const std::string& needle) {
    const auto before = snapshot(dir);
    auto fresh = tiny_model(7);
    TrainerState state;
    try {
      load_checkpoint(dir.string(), *fresh, nullptr, state);
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(snapshot(dir), before);
    TrainConfig resume = tiny_config(dir, 8);
    resume.resume = true;
    EXPECT_THROW(train(*fresh, task, resume), Error);
    EXPECT_EQ(snapshot(dir), before) << "a failed resume must leave the run directory as it was";
  };
  std::ofstream(tensors, std::ios::binary | std::ios::trunc) << good_tensors.substr(0, good_tensors.size() / 2);
  expect_error("truncated or corrupt");
  std::string flipped = good_tensors;
  flipped[flipped.size() - 1] ^= 0x40;
  std::ofstream(tensors, std::ios::binary | std::ios::trunc) << flipped;
  expect_error("checksum");
  std::ofstream(tensors, std::ios::binary | std::ios::trunc) << good_tensors;
  std::ofstream(record, std::ios::trunc) << good_record.substr(0, 40);
  expect_error("not valid JSON");
  std::ofstream(record, std::ios::trunc) << good_record;
  fs::remove(tensors);
  expect_error("missing");
  // A checkpoint of another architecture does not fit.
  std::ofstream(tensors, std::ios::binary | std::ios::trunc) << good_tensors;
  LanguageModelOptions other;
  other.vocab_size = 16;
  other.dim = 8;
  other.mixers = {"softmax:heads=2"};
  LanguageModelImpl wrong(other);
  TrainerState state;
  try {
    load_checkpoint(dir.string(), wrong, nullptr, state);
    ADD_FAILURE() << "expected a mismatch error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the model"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, AStrayRecordWhoseStepOverflowsIsAClearError) {
  const auto dir = fresh_dir("stray");
  fs::create_directories(dir / "checkpoints");
  std::ofstream(dir / "checkpoints" / "step-99999999999999999999.json") << "{}";
  EXPECT_NE(error_of([&] { list_checkpoints(dir.string()); })
                .find("step-99999999999999999999.json: its step number does not fit in 64 bits"),
            std::string::npos);
}

TEST(Trainer, EarlyStopAndSummary) {
  auto task = tiny_task();
  const auto dir = fresh_dir("early");
  auto m = tiny_model(8);
  TrainConfig c = tiny_config(dir, 40);
  c.target = 1e-9;  // reached at the first evaluation
  const TrainSummary s = train(*m, task, c);
  EXPECT_TRUE(s.stopped_early);
  EXPECT_EQ(s.steps_done, 4);
  const auto j = nlohmann::json::parse(read_file((dir / "summary.json").string()));
  EXPECT_TRUE(j["final"].contains("accuracy"));
  EXPECT_TRUE(j["best"].contains("accuracy"));
  EXPECT_EQ(j["parameters"].get<int64_t>(), m->parameter_count());
  EXPECT_EQ(j["metric"], "accuracy");
  // Every log line, train and eval, carries the step, split, loss, lr, grad norm and throughput.
  std::ifstream log(dir / "metrics.jsonl");
  int evals = 0;
  for (std::string line; std::getline(log, line);) {
    const auto e = nlohmann::json::parse(line);
    for (const char* key : {"step", "split", "loss", "lr", "grad_norm", "tokens_per_s", "accuracy"})
      EXPECT_TRUE(e.contains(key)) << key << " missing in " << line;
    evals += e["split"] == "test";
  }
  EXPECT_EQ(evals, 1);
}

// A NaN written into one parameter after step 3 makes step 4's loss NaN: the run stops with an Error naming
// the step and that parameter (the first non-finite tensor), and skipping cannot help, so it stops too.
TEST(Trainer, NonFiniteParameterStopsTheRunNamingStepAndParameter) {
  at::set_num_threads(1);
  auto task = tiny_task();
  for (bool skip : {false, true}) {
    SCOPED_TRACE(skip ? "skip_nonfinite" : "default");
    auto model = tiny_model(5);
    const auto params = model->named_parameters();
    const std::string victim = params.keys().back();
    TrainConfig c = tiny_config(fresh_dir("nan_parameter"), 8);
    c.skip_nonfinite = skip;
    c.after_step = [&](int64_t step) {
      torch::NoGradGuard no_grad;
      if (step == 3) params[victim].view(-1)[0] = std::numeric_limits<double>::quiet_NaN();
    };
    const std::string m = error_of([&] { train(*model, task, c); });
    EXPECT_NE(m.find("train: step 4: parameter '" + victim + "' is not finite"), std::string::npos) << m;
    EXPECT_NE(m.find(skip ? "skipping steps cannot help" : "--skip-nonfinite skips such steps"), std::string::npos) << m;
  }
}

// A gradient hook that turns one parameter's gradient into NaN for two backward passes (steps 3 and 4):
// by default step 3 stops naming that gradient; with skip_nonfinite both updates are skipped (the
// weights do not move), counted in the summary, summary.json and the checkpoint, and training goes on.
TEST(Trainer, NonFiniteGradientStopsOrIsSkippedAndCounted) {
  at::set_num_threads(1);
  auto task = tiny_task();
  for (bool skip : {false, true}) {
    SCOPED_TRACE(skip ? "skip_nonfinite" : "default");
    auto model = tiny_model(6);
    const auto params = model->named_parameters();
    const std::string victim = params.keys().front();
    const auto dir = fresh_dir("nan_gradient");
    TrainConfig c = tiny_config(dir, 8);
    c.skip_nonfinite = skip;
    auto poisoned = std::make_shared<int>(0);
    std::map<int64_t, std::vector<torch::Tensor>> weights;  // after each step
    c.after_step = [&, poisoned](int64_t step) {
      std::vector<torch::Tensor> w;
      for (const auto& p : model->parameters()) w.push_back(p.detach().clone());
      weights[step] = w;
      if (step == 2)
        params[victim].register_hook([poisoned](torch::Tensor g) {
          return (*poisoned)++ < 2 ? torch::full_like(g, std::numeric_limits<double>::quiet_NaN()) : g;
        });
    };
    if (!skip) {
      const std::string m = error_of([&] { train(*model, task, c); });
      EXPECT_NE(m.find("train: step 3: the gradient of parameter '" + victim + "' is not finite"), std::string::npos) << m;
      continue;
    }
    const TrainSummary s = train(*model, task, c);
    EXPECT_EQ(s.steps_done, 8);
    EXPECT_EQ(s.skipped_nonfinite, 2);
    for (size_t i = 0; i < weights[2].size(); ++i) {
      EXPECT_TRUE(torch::equal(weights[2][i], weights[3][i]));  // steps 3 and 4 were skipped
      EXPECT_TRUE(torch::equal(weights[3][i], weights[4][i]));
    }
    EXPECT_FALSE(torch::equal(weights[4][0], weights[5][0]));  // step 5 trains again
    for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
    const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
    EXPECT_EQ(summary["skipped_nonfinite"].get<int64_t>(), 2);
    TrainerState state;
    auto fresh = tiny_model(6);
    ASSERT_TRUE(load_checkpoint(dir.string(), *fresh, nullptr, state));
    EXPECT_EQ(state.skipped_nonfinite, 2);
  }
}

// Found by fuzz/fuzz_checkpoint.cpp: a record naming a tensors file with a name too long for the file
// system threw std::filesystem_error out of load_checkpoint. A record now names its own step's tensors.
TEST(Checkpoint, ARecordNamingOtherTensorsIsAClearError) {
  at::set_num_threads(1);
  auto task = tiny_task();
  const auto dir = fresh_dir("other_tensors");
  auto model = tiny_model(4);
  train(*model, task, tiny_config(dir, 5));
  const auto record = dir / "checkpoints" / "step-00000005.json";
  const std::string original = read_file(record.string());
  for (const std::string& name : {std::string(5000, 'A'), std::string("step-00000004.safetensors")}) {
    auto j = nlohmann::json::parse(original);
    j["tensors"] = name;
    write_file_atomically(record.string(), j.dump());
    TrainerState state;
    const std::string m = error_of([&] { load_checkpoint(dir.string(), *model, nullptr, state); });
    EXPECT_NE(m.find("names a tensors file other than its own"), std::string::npos) << m;
  }
  auto j = nlohmann::json::parse(original);
  j["step"] = 4;
  write_file_atomically(record.string(), j.dump());
  TrainerState state;
  const std::string m = error_of([&] { load_checkpoint(dir.string(), *model, nullptr, state); });
  EXPECT_NE(m.find("records step 4, not its own"), std::string::npos) << m;
}

}  // namespace
}  // namespace seqmix

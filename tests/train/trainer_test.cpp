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
#include "seqmix/io/checksum.h"
#include "seqmix/io/error.h"
#include "seqmix/io/safetensors.h"
#include "seqmix/models/language_model.h"
#include "seqmix/tasks/mad/recall.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/schedule.h"
#include "seqmix/train/trainer.h"
#include "seqmix/train/progress.h"
#include "seqmix/train/run.h"
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

std::shared_ptr<LanguageModelImpl> tiny_model(uint64_t seed, double dropout = 0.0) {
  torch::manual_seed(seed);
  LanguageModelOptions o;
  o.embedding_dropout = dropout;
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
  c.target = 0;  // never stops early
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

// Trains the tiny model 13 steps in `precision` straight through and with a crash after step 8 and a resume from
// the step-5 checkpoint; both must end bit for bit alike, weights and logs. Returns the final weights.
torch::OrderedDict<std::string, torch::Tensor> expect_resume_ends_bit_identical(Precision precision) {
  at::set_num_threads(1);
  auto task = tiny_task();
  const std::string tag = precision_name(precision);
  const auto dir_a = fresh_dir("uninterrupted-" + tag), dir_b = fresh_dir("interrupted-" + tag);
  auto config = [&](const fs::path& dir) {
    TrainConfig c = tiny_config(dir, 13);
    c.precision = precision;
    return c;
  };
  auto a = tiny_model(3);
  train(*a, task, config(dir_a));

  auto b = tiny_model(3);
  TrainConfig interrupted = config(dir_b);
  interrupted.after_step = [](int64_t step) {
    if (step == 8) throw std::runtime_error("simulated crash");
  };
  EXPECT_THROW(train(*b, task, interrupted), std::runtime_error);
  EXPECT_EQ(list_checkpoints(dir_b.string()), (std::vector<int64_t>{5}));

  auto c = tiny_model(99);  // different initial weights: everything must come from the checkpoint
  TrainConfig resumed = config(dir_b);
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
  for (const auto& p : c->named_parameters()) EXPECT_EQ(p.value().scalar_type(), torch::kFloat) << p.key();
  return a->named_parameters();
}

TEST(Checkpoint, ResumeAfterAnInterruptionEndsBitIdentical) { expect_resume_ends_bit_identical(Precision::fp32); }

// Under bfloat16 autocast the weights and the optimizer state stay float32 and a resumed run still ends bit for bit
// where the uninterrupted one does; and the bf16 run is not the fp32 run (autocast took effect).
TEST(Checkpoint, ABf16RunResumesBitIdenticalWithFloat32Weights) {
  const auto bf16 = expect_resume_ends_bit_identical(Precision::bf16);
  const auto fp32 = expect_resume_ends_bit_identical(Precision::fp32);
  bool differs = false;
  for (const auto& p : fp32) differs = differs || !torch::equal(p.value(), bf16[p.key()]);
  EXPECT_TRUE(differs);
}

// With dropout every training step draws from the generator, so a resume that did not restore it would train on
// other masks: the resumed run must still end bit-identical, and one whose generator is disturbed after its first
// step must not (the control that shows the draws are observed).
TEST(Checkpoint, ResumeWithDropoutEndsBitIdentical) {
  at::set_num_threads(1);
  auto task = tiny_task();
  const auto dir_a = fresh_dir("dropout_uninterrupted"), dir_b = fresh_dir("dropout_interrupted");
  auto a = tiny_model(3, 0.3);
  train(*a, task, tiny_config(dir_a, 13));
  auto b = tiny_model(3, 0.3);
  TrainConfig interrupted = tiny_config(dir_b, 13);
  interrupted.after_step = [](int64_t step) {
    if (step == 8) throw std::runtime_error("simulated crash");
  };
  EXPECT_THROW(train(*b, task, interrupted), std::runtime_error);
  const fs::path saved = fresh_dir("dropout_saved");
  fs::copy(dir_b, saved, fs::copy_options::recursive);

  auto resume_into = [&](const fs::path& dir, bool disturb) {
    torch::manual_seed(12345);  // whatever the generator holds now must not matter
    auto c = tiny_model(99, 0.3);
    TrainConfig resumed = tiny_config(dir, 13);
    resumed.resume = true;
    if (disturb)
      resumed.after_step = [](int64_t step) {
        if (step == 6) torch::rand({1});  // one extra draw: every later mask moves
      };
    train(*c, task, resumed);
    return c;
  };
  auto c = resume_into(dir_b, false);
  for (const auto& p : a->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), c->named_parameters()[p.key()])) << p.key();
  auto d = resume_into(saved, true);
  bool all_equal = true;
  for (const auto& p : a->named_parameters()) all_equal &= torch::equal(p.value(), d->named_parameters()[p.key()]);
  EXPECT_FALSE(all_equal) << "a disturbed generator left the run unchanged: the dropout draws are not observed";
}

// Draw, save, draw, load, draw again: the draws after the load repeat the ones after the save.
TEST(Checkpoint, TheGeneratorRoundTrips) {
  const auto dir = fresh_dir("generator");
  auto model = tiny_model(1);
  auto optimizer = make_adamw(*model, OptimizerConfig{});
  torch::manual_seed(2024);
  torch::rand({5});
  TrainerState state;
  state.step = 1;
  save_checkpoint(dir.string(), *model, *optimizer, state, 1);
  const auto after_save = torch::rand({16});
  const auto normal_after_save = torch::randn({3});
  torch::rand({1000});
  TrainerState loaded;
  ASSERT_TRUE(load_checkpoint(dir.string(), *model, optimizer.get(), loaded));
  EXPECT_TRUE(torch::equal(torch::rand({16}), after_save));
  EXPECT_TRUE(torch::equal(torch::randn({3}), normal_after_save));
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
  // The optimizer's file is checked as strictly.
  const fs::path optimizer = dir / "checkpoints" / "step-00000005.optimizer.safetensors";
  const std::string good_optimizer = read_file(optimizer.string());
  std::string flipped_optimizer = good_optimizer;
  flipped_optimizer[flipped_optimizer.size() / 2] ^= 0x01;
  std::ofstream(optimizer, std::ios::binary | std::ios::trunc) << flipped_optimizer;
  {
    auto fresh = tiny_model(7);
    auto adamw = make_adamw(*fresh, OptimizerConfig{});
    TrainerState state;
    const std::string m = error_of([&] { load_checkpoint(dir.string(), *fresh, adamw.get(), state); });
    EXPECT_NE(m.find("optimizer.safetensors is truncated or corrupt"), std::string::npos) << m;
    // Reading the weights alone (eval, generate, --init-from) neither needs nor checks the optimizer file.
    EXPECT_TRUE(load_checkpoint(dir.string(), *fresh, nullptr, state));
    fs::remove(optimizer);
    EXPECT_TRUE(load_checkpoint(dir.string(), *fresh, nullptr, state));
    EXPECT_NE(error_of([&] { load_checkpoint(dir.string(), *fresh, adamw.get(), state); }).find("is missing"),
              std::string::npos);
  }
  std::ofstream(optimizer, std::ios::binary | std::ios::trunc) << good_optimizer;
  // A record of a newer format is refused by its version.
  {
    auto j = nlohmann::json::parse(good_record);
    j["version"] = 3;
    std::ofstream(record, std::ios::trunc) << j.dump(2);
    expect_error("checkpoint format version 3, from a newer seqmix; this seqmix reads versions 1 and 2");
  }
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

// Format 2: the weights alone in a safetensors file other tools read as a PyTorch state dict (format=pt, the
// model's own names), AdamW's state in a second file, each with its size and SHA-256 in the record.
TEST(Checkpoint, WeightsAndOptimizerStateAreSeparateFilesWithTheirSha256) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // FIPS 180-2
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  auto task = tiny_task();
  const auto dir = fresh_dir("format2");
  auto model = tiny_model(3);
  train(*model, task, tiny_config(dir, 5));
  const fs::path c = dir / "checkpoints";
  const auto record = nlohmann::json::parse(read_file((c / "step-00000005.json").string()));
  EXPECT_EQ(record.at("format"), "seqmix-checkpoint");
  EXPECT_EQ(record.at("version"), 2);
  for (const char* part : {"weights", "optimizer"}) {
    const std::string file = record.at(part).at("file");
    const std::string bytes = read_file((c / file).string());
    EXPECT_EQ(record.at(part).at("bytes").get<uint64_t>(), bytes.size()) << part;
    EXPECT_EQ(record.at(part).at("sha256").get<std::string>(), sha256_hex(bytes)) << part;
  }
  const SafetensorsFile weights = read_safetensors((c / "step-00000005.safetensors").string());
  EXPECT_EQ(weights.metadata.at("format"), "pt");
  std::set<std::string> names, expected;
  for (const auto& [name, tensor] : weights.tensors) names.insert(name);
  for (const auto& p : model->named_parameters()) {
    expected.insert(p.key());
    EXPECT_TRUE(torch::equal(weights.at(p.key()), p.value())) << p.key();
  }
  for (const auto& b : model->named_buffers()) expected.insert(b.key());
  EXPECT_EQ(names, expected);  // the weights and nothing else
  const SafetensorsFile optimizer = read_safetensors((c / "step-00000005.optimizer.safetensors").string());
  EXPECT_EQ(optimizer.metadata.at("format"), "pt");
  EXPECT_EQ(optimizer.tensors.size(), 3 * model->named_parameters().size());
  for (const auto& p : model->named_parameters()) {
    EXPECT_EQ(optimizer.at(p.key() + ".exp_avg").sizes(), p.value().sizes());
    EXPECT_EQ(optimizer.at(p.key() + ".step").item<int64_t>(), 5);
  }
  // load_model_weights reads the weights file (what `seqmix eval --weights` and --init-from take).
  auto other = tiny_model(11);
  load_model_weights((c / "step-00000005.safetensors").string(), *other);
  for (const auto& p : other->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), model->named_parameters()[p.key()])) << p.key();
}

// A checkpoint written by seqmix before format 2 (tests/data/run_format1: three steps of a 1-layer lm on MAD's
// recall, one tensors file of model.* and optimizer.*, an FNV-1a checksum) still loads, weights, AdamW state
// and progress, and a resumed run carries on in format 2.
TEST(Checkpoint, Format1CheckpointsStillLoadAndResume) {
  const fs::path fixture = fs::path(__FILE__).parent_path().parent_path() / "data" / "run_format1";
  const auto dir = fresh_dir("format1");
  fs::remove_all(dir);
  fs::copy(fixture, dir, fs::copy_options::recursive);
  const SafetensorsFile stored = read_safetensors((dir / "checkpoints" / "step-00000003.safetensors").string());
  EXPECT_EQ(stored.metadata.at("format"), "seqmix-checkpoint-1");
  int64_t step = 0;
  seqmix::Run run = load_run(dir.string(), 1, -1, step);
  EXPECT_EQ(step, 3);
  for (const auto& p : run.model->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), stored.at("model." + p.key()))) << p.key();
  auto optimizer = make_adamw(*run.model, OptimizerConfig{});
  TrainerState state;
  ASSERT_TRUE(load_checkpoint(dir.string(), *run.model, optimizer.get(), state));
  EXPECT_EQ(state.step, 3);
  for (const auto& p : run.model->named_parameters()) {
    auto* s = static_cast<torch::optim::AdamWParamState*>(optimizer->state().at(p.value().unsafeGetTensorImpl()).get());
    EXPECT_TRUE(torch::equal(s->exp_avg_sq(), stored.at("optimizer." + p.key() + ".exp_avg_sq"))) << p.key();
    EXPECT_EQ(s->step(), 3);
  }
  // load_model_weights reads a format-1 tensors file too: a model of other initial weights takes them.
  {
    Config other = run_directory_config(dir.string(), "");
    other.set("seed", "5", "test");
    other.set("threads", "1", "test");
    seqmix::Run fresh = build_run(other, "");
    EXPECT_FALSE(torch::equal(fresh.model->named_parameters()[0].value(), stored.at("model." + fresh.model->named_parameters()[0].key())));
    load_model_weights((dir / "checkpoints" / "step-00000003.safetensors").string(), *fresh.model);
    for (const auto& p : fresh.model->named_parameters())
      EXPECT_TRUE(torch::equal(p.value(), stored.at("model." + p.key()))) << p.key();
  }
  // Resumed with more steps, the run goes on from step 3 and writes format 2.
  Config config = run_directory_config(dir.string(), "");
  config.set("train.steps", "5", "test");
  config.set("threads", "1", "test");
  seqmix::Run resumed = build_run(config, dir.string());
  resumed.train.resume = true;
  resumed.train.extend = true;
  resumed.train.quiet = true;
  const TrainSummary summary = train(*resumed.model, *resumed.task, resumed.train);
  EXPECT_EQ(summary.steps_done, 5);
  const auto record = nlohmann::json::parse(read_file((dir / "checkpoints" / "step-00000005.json").string()));
  EXPECT_EQ(record.at("version"), 2);
}

// A resume checks the whole folder before it writes: a `checkpoints` that is a file, or a metrics.jsonl that is a
// folder, is one error and the log is not truncated.
TEST(Trainer, AResumeOfADamagedFolderChangesNothing) {
  auto task = tiny_task();
  const auto dir = fresh_dir("damaged");
  auto model = tiny_model(3);
  train(*model, task, tiny_config(dir, 10));
  fs::remove_all(dir / "checkpoints");
  std::ofstream(dir / "checkpoints") << "not a folder";
  const auto before = snapshot(dir);
  TrainConfig resume = tiny_config(dir, 10);
  resume.resume = true;
  const std::string m = error_of([&] { train(*model, task, resume); });
  EXPECT_NE(m.find("/checkpoints is not a folder; move it away to resume"), std::string::npos) << m;
  EXPECT_EQ(snapshot(dir), before);
  fs::remove(dir / "checkpoints");
  const std::string log = read_file((dir / "metrics.jsonl").string());
  fs::remove(dir / "summary.json");
  fs::create_directories(dir / "summary.json");
  const std::string m2 = error_of([&] { train(*model, task, resume); });
  EXPECT_NE(m2.find("summary.json is not a regular file"), std::string::npos) << m2;
  EXPECT_EQ(read_file((dir / "metrics.jsonl").string()), log);
}

// One step's lower bound (inputs, outputs and their gradients) is checked against the machine's memory.
TEST(Trainer, ABatchBeyondTheMachinesMemoryIsRefusedBeforeAllocation) {
  auto task = tiny_task();
  EXPECT_NO_THROW(check_batch_fits_in_memory(task, 1024));
  const std::string m = error_of([&] { check_batch_fits_in_memory(task, int64_t{1} << 40); });
  EXPECT_NE(m.find("train.batch_size 1099511627776: one step needs at least"), std::string::npos) << m;
  EXPECT_NE(m.find("of memory; choose a smaller --batch-size"), std::string::npos) << m;
  auto model = tiny_model(3);
  TrainConfig config = tiny_config(fresh_dir("huge_batch"), 1);
  config.batch_size = int64_t{1} << 40;
  EXPECT_NE(error_of([&] { train(*model, task, config); }).find("one step needs at least"), std::string::npos);
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
    auto adamw = make_adamw(*model, OptimizerConfig{});  // the optimizer's file is read only when it is wanted
    for (const char* part : {"weights", "optimizer"}) {
      auto j = nlohmann::json::parse(original);
      j[part]["file"] = name;
      write_file_atomically(record.string(), j.dump());
      TrainerState state;
      const std::string m = error_of([&] { load_checkpoint(dir.string(), *model, adamw.get(), state); });
      EXPECT_NE(m.find("names a file other than its own"), std::string::npos) << m;
    }
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

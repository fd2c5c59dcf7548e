// seqmix train as a data-parallel job of several processes on this machine (loopback): the same
// trajectory as one process with the global batch, resume with another world size, and a dead worker
// ending the job with a message instead of a hang.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "seqmix/dist/launcher.h"
#include "seqmix/io/safetensors.h"

namespace seqmix::testing {
namespace {
namespace fs = std::filesystem;

// A small MAD recall run; every process single-threaded so that two of them share the two cores.
// Two numerical choices keep rounding differences from being amplified, so that "the same trajectory" can be
// checked at 1e-6: AdamW's update g / (sqrt(v) + eps) turns a gradient entry that is zero up to rounding
// (a sum of larger terms that cancel) into a step of up to lr x (rounding / eps); with eps = 1e-8 the
// different summation order of a half batch moved a few entries by 2e-5 (7e-6 relative), with eps = 1e-6 it
// is bounded 100x lower. And softmax attention's key bias has a true gradient of exactly zero (it shifts every
// logit of a query alike), so its values are rounding noise in any run: bias=0 leaves it out.
std::vector<std::string> recall_run(const std::string& out, int64_t steps, int64_t batch = 16, int64_t eval_every = 3) {
  return {"train",
          "--task",
          "mad.in_context_recall:seq_len=32,num_train=512,num_test=64",
          "--mixer",
          "softmax:bias=0",
          "--steps",
          std::to_string(steps),
          "--batch-size",
          std::to_string(batch),
          "--eval-every",
          std::to_string(eval_every),
          "--seed",
          "3",
          "--threads",
          "1",
          "--set",
          "train.checkpoint_every=3",
          "--set",
          "train.target=0",
          "--set",
          "train.grad_clip=1",
          "--set",
          "train.eps=1e-6",
          "--out",
          out};
}

fs::path scratch(const std::string& name) { return scratch_path(name); }

std::vector<std::string> with(std::vector<std::string> arguments, const std::vector<std::string>& more) {
  arguments.insert(arguments.end(), more.begin(), more.end());
  return arguments;
}

// A checkpoint's weights file, or with `optimizer` its AdamW state file.
fs::path checkpoint_tensors(const fs::path& run, int64_t step, bool optimizer = false) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld%s.safetensors", static_cast<long long>(step), optimizer ? ".optimizer" : "");
  return run / "checkpoints" / name;
}

// The largest ||a - b|| / ||b|| over the tensors whose name starts with `prefix` ("" for all); both files must hold
// the same tensors.
double max_relative_difference(const fs::path& a, const fs::path& b, const std::string& prefix = "") {
  const SafetensorsFile fa = read_safetensors(a.string()), fb = read_safetensors(b.string());
  EXPECT_EQ(fa.tensors.size(), fb.tensors.size());
  double worst = 0;
  std::string worst_name;
  int compared = 0;
  for (const auto& [name, tensor] : fb.tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    const auto x = fa.at(name).to(torch::kFloat64), y = tensor.to(torch::kFloat64);
    const double norm = y.norm().item<double>();
    const double diff = (x - y).norm().item<double>();
    const double relative = norm > 0 ? diff / norm : diff;
    if (relative > worst) {
      worst = relative;
      worst_name = name;
    }
    ++compared;
  }
  std::printf("%s vs %s: largest relative difference %.3g in %s\n", a.filename().c_str(), b.filename().c_str(), worst,
              worst_name.c_str());
  EXPECT_GT(compared, 0) << "no tensor named " << prefix << "* in " << b;
  return worst;
}

TEST(DataParallel, TwoProcessesFollowOneProcessWithTheGlobalBatch) {
  const fs::path one = scratch("one"), two = scratch("two");
  ASSERT_EQ(run_seqmix(recall_run(one.string(), 6), one.string() + ".log"), 0) << one;
  ASSERT_EQ(run_seqmix(with(recall_run(two.string(), 6), {"--nproc", "2"}), two.string() + ".log"), 0)
      << std::ifstream(two.string() + ".log").rdbuf();
  // Per-rank batch 8 on 2 processes against batch 16 on one: parameters and AdamW moments.
  const double parameters = max_relative_difference(checkpoint_tensors(two, 6), checkpoint_tensors(one, 6));
  const double moments = max_relative_difference(checkpoint_tensors(two, 6, true), checkpoint_tensors(one, 6, true));
  std::printf("2 processes vs 1: largest relative difference %.3g (parameters), %.3g (optimizer state)\n", parameters,
              moments);
  EXPECT_LE(parameters, 1e-6);
  EXPECT_LE(moments, 1e-5);
  // Only rank 0 wrote, and the run says how many processes trained it.
  std::ifstream summary(two / "summary.json");
  std::stringstream text;
  text << summary.rdbuf();
  EXPECT_NE(text.str().find("\"processes\": 2"), std::string::npos) << text.str();
}

TEST(DataParallel, ATwoProcessCheckpointResumesAsOneProcessOnTheSameTrajectory) {
  const fs::path run = scratch("resume_as_one");
  ASSERT_EQ(run_seqmix(with(recall_run(run.string(), 6), {"--nproc", "2"}), run.string() + ".log"), 0)
      << std::ifstream(run.string() + ".log").rdbuf();
  const fs::path uninterrupted = run.string() + "-step6.safetensors";
  fs::copy_file(checkpoint_tensors(run, 6), uninterrupted);
  // Forget step 6 (its record commits it): the run stands at its step-3 checkpoint, as if stopped there.
  fs::remove(run / "checkpoints" / "step-00000006.json");
  ASSERT_EQ(run_seqmix({"train", "--resume", run.string()}, run.string() + "-resume.log"), 0)
      << std::ifstream(run.string() + "-resume.log").rdbuf();
  EXPECT_LE(max_relative_difference(checkpoint_tensors(run, 6), uninterrupted), 1e-6);
}

TEST(DataParallel, AOneProcessCheckpointResumesAsTwoProcessesJoinedThroughAFileStore) {
  const fs::path run = scratch("resume_as_two");
  ASSERT_EQ(run_seqmix(recall_run(run.string(), 6), run.string() + ".log"), 0);
  const fs::path uninterrupted = run.string() + "-step6.safetensors";
  fs::copy_file(checkpoint_tensors(run, 6), uninterrupted);
  fs::remove(run / "checkpoints" / "step-00000006.json");
  const std::string store = (run.parent_path() / "resume_as_two.store").string();
  fs::remove(store);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int rank = 0; rank < 2; ++rank)
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{"train", "--resume", run.string(), "--dist-init", "file://" + store, "--rank",
                                 std::to_string(rank), "--world-size", "2"},
        run.string() + "-rank" + std::to_string(rank) + ".log"));
  for (auto& worker : workers) EXPECT_EQ(worker->wait_for(std::chrono::minutes(5)), 0) << worker->log();
  EXPECT_LE(max_relative_difference(checkpoint_tensors(run, 6), uninterrupted), 1e-6);
}

TEST(DataParallel, TorchrunStartsTheSameJob) {
  // torchrun's static rendezvous: its agent serves the store, the workers are clients under its prefix.
  const fs::path one = scratch("torchrun_one"), two = scratch("torchrun_two");
  ASSERT_EQ(run_seqmix(recall_run(one.string(), 6), one.string() + ".log"), 0);
  // The venv's torch: python -m torch.distributed.run is torchrun.
  std::vector<std::string> arguments = {"-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
                                        "--master-addr", "127.0.0.1", "--master-port",
                                        std::to_string(dist::free_loopback_port()), "--no-python", SEQMIX_BINARY};
  for (const auto& a : recall_run(two.string(), 6)) arguments.push_back(a);
  ChildProcess torchrun(SEQMIX_PYTHON, arguments, two.string() + ".log", {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(torchrun.wait_for(std::chrono::minutes(5)), 0) << torchrun.log();
  EXPECT_LE(max_relative_difference(checkpoint_tensors(two, 6), checkpoint_tensors(one, 6)), 1e-6);
}

// Waits until the run has logged a training step: every worker is past joining and training.
bool wait_for_training(const fs::path& run, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream log(run / "metrics.jsonl");
    std::string line;
    if (std::getline(log, line) && !line.empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::vector<std::string> long_run(const fs::path& run) {
  return with(recall_run(run.string(), 100000, 16, 0), {"--set", "train.log_every=1"});
}

TEST(DataParallel, KillingAWorkerEndsTheLaunchedJobWithAMessage) {
  const fs::path run = scratch("kill_launched");
  ChildProcess launcher(with(long_run(run), {"--nproc", "2"}), run.string() + ".log");
  ASSERT_TRUE(wait_for_training(run, std::chrono::seconds(120))) << launcher.log();
  pid_t rank1 = -1;
  for (pid_t worker : child_pids(launcher.pid()))
    if (environment_of(worker, "RANK") == "1") rank1 = worker;
  ASSERT_GT(rank1, 0) << "no worker with RANK=1 under the launcher";
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const auto code = launcher.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "the job was still running 60 s after a worker was killed";
  EXPECT_EQ(*code, 1);
  EXPECT_NE(launcher.log().find("train --nproc 2: worker rank 1 of 2 was killed by signal 9"), std::string::npos)
      << launcher.log();
  EXPECT_TRUE(child_pids(launcher.pid()).empty());
}

TEST(DataParallel, KillingAWorkerEndsItsPeerWithAMessage) {
  // No launcher: the surviving worker itself notices that its peer is gone.
  const fs::path run = scratch("kill_peer");
  const std::string store = run.string() + ".store";
  fs::remove(store);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int rank = 0; rank < 2; ++rank)
    workers.push_back(std::make_unique<ChildProcess>(
        with(long_run(run), {"--dist-init", "file://" + store, "--rank", std::to_string(rank), "--world-size", "2",
                             "--dist-timeout", "50"}),
        run.string() + "-rank" + std::to_string(rank) + ".log"));
  ASSERT_TRUE(wait_for_training(run, std::chrono::seconds(120))) << workers[0]->log();
  ASSERT_EQ(::kill(workers[1]->pid(), SIGKILL), 0);
  const auto code = workers[0]->wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "rank 0 was still running 60 s after its peer was killed";
  EXPECT_EQ(*code, 1);
  EXPECT_NE(workers[0]->log().find("seqmix: error: distributed: rank 0 of 2 (gloo, file://"), std::string::npos)
      << workers[0]->log();
}

TEST(DataParallel, ABatchThatDoesNotSplitIsRefusedBeforeAnyWorkerStarts) {
  const fs::path run = scratch("uneven");
  EXPECT_EQ(run_seqmix(with(recall_run(run.string(), 2, 15), {"--nproc", "2"}), run.string() + ".log"), 1);
  std::ifstream log(run.string() + ".log");
  std::string first;
  std::getline(log, first);
  EXPECT_EQ(first, "seqmix: error: train: the batch size 15 does not split evenly over 2 processes; choose a multiple of 2");
  EXPECT_FALSE(fs::exists(run / "config.yaml"));
}

}  // namespace
}  // namespace seqmix::testing

// The device a command computes on (seqmix/train/device.h): names, the errors for a device this build or machine
// lacks, and, on a GPU machine (tests named Cuda.*, label cuda; skipped in one line without a GPU), training on
// CUDA against the same steps on the CPU and a CPU checkpoint resumed on CUDA.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <filesystem>
#include <unistd.h>

#include "seqmix/models/language_model.h"
#include "seqmix/tasks/mad/recall.h"
#include "seqmix/train/checkpoint.h"
#include "seqmix/train/device.h"
#include "seqmix/train/trainer.h"
#include "support/error_of.h"

namespace seqmix {
namespace {
namespace fs = std::filesystem;
using seqmix::testing::error_of;

TEST(Device, TheCpuAndUnknownNames) {
  EXPECT_EQ(parse_device("cpu", "--device"), c10::Device(c10::kCPU));
  EXPECT_EQ(error_of([] { parse_device("tpu", "--device"); }),
            "--device: unknown device 'tpu'; valid devices: cpu, cuda, cuda:N");
  EXPECT_EQ(error_of([] { parse_device("cuda:x", "--device"); }),
            "--device: 'cuda:x' is not a device; write cuda or cuda:N with N a GPU's index");
  EXPECT_EQ(error_of([] { parse_device("CPU", "device"); }),
            "device: unknown device 'CPU'; valid devices: cpu, cuda, cuda:N");
}

// A GPU that is not there is an error naming what is missing, never a CPU run.
TEST(Device, AMissingGpuIsOneLine) {
  const std::string m = error_of([] { parse_device("cuda:999", "--device"); });
  if (!cuda_built())
    EXPECT_NE(m.find("this seqmix was built without CUDA support"), std::string::npos) << m;
  else if (torch::cuda::device_count() == 0)
    EXPECT_EQ(m, "--device cuda:999: no GPU is visible to this process (seqmix info lists the GPUs)");
  else
    EXPECT_NE(m.find("--device cuda:999: there is no GPU 999; this process sees"), std::string::npos) << m;
  EXPECT_EQ(visible_gpus().size(), cuda_built() ? static_cast<size_t>(torch::cuda::device_count()) : 0u);
}

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("seqmix-device-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  return dir;
}

std::shared_ptr<LanguageModelImpl> tiny_model() {
  torch::manual_seed(3);
  LanguageModelOptions o;
  o.vocab_size = 16;
  o.dim = 16;
  o.layers = 2;
  o.mixers = {"fem:prior=softmax,heads=2", "gla:heads=2"};
  return std::make_shared<LanguageModelImpl>(o);
}

RecallTask tiny_task() { return RecallTask("mad.in_context_recall", RecallOptions{16, 16, 64, 16}, "tiny"); }

TrainConfig tiny_config(const fs::path& dir, int64_t steps, c10::Device device) {
  TrainConfig c;
  c.steps = steps;
  c.batch_size = 8;
  c.optimizer.lr = 1e-2;
  c.target = 0;  // never stops early
  c.eval_every = 3;
  c.checkpoint_every = 3;
  c.out_dir = dir.string();
  c.quiet = true;
  c.device = device;
  return c;
}

bool have_gpu() { return cuda_built() && torch::cuda::device_count() > 0; }

// Six AdamW steps on CUDA follow the CPU's six steps: the same batches, float32 on both; compared by the loss, since
// AdamW turns a gradient that is zero up to rounding (a key bias under softmax) into a step of +-lr on either device.
TEST(Cuda, TrainingStepsOnCudaEqualTheCpusSteps) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible: the cuda tests run on a GPU machine";
  auto task = tiny_task();
  auto cpu = tiny_model(), gpu = tiny_model();
  const TrainSummary a = train(*cpu, task, tiny_config(fresh_dir("cpu"), 6, c10::Device(c10::kCPU)));
  const TrainSummary b = train(*gpu, task, tiny_config(fresh_dir("gpu"), 6, c10::Device(c10::kCUDA, 0)));
  EXPECT_NEAR(a.final_metrics.at("loss"), b.final_metrics.at("loss"), 1e-3);
  for (const auto& p : gpu->named_parameters()) EXPECT_TRUE(p.value().is_cuda()) << p.key();
}

// A run checkpointed on the CPU at step 3 resumes on CUDA and reaches what 6 CPU steps reach.
TEST(Cuda, ACpuCheckpointResumesOnCuda) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU visible: the cuda tests run on a GPU machine";
  auto task = tiny_task();
  const auto dir = fresh_dir("resume");
  auto first = tiny_model();
  train(*first, task, tiny_config(dir, 3, c10::Device(c10::kCPU)));
  auto resumed = tiny_model();
  TrainConfig more = tiny_config(dir, 6, c10::Device(c10::kCUDA, 0));
  more.resume = true;
  const TrainSummary r = train(*resumed, task, more);
  auto straight = tiny_model();
  const TrainSummary s = train(*straight, task, tiny_config(fresh_dir("straight"), 6, c10::Device(c10::kCPU)));
  EXPECT_EQ(r.steps_done, 6);
  EXPECT_NEAR(r.final_metrics.at("loss"), s.final_metrics.at("loss"), 1e-3);
}

}  // namespace
}  // namespace seqmix

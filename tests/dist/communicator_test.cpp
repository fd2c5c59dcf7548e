// The process group and the data-parallel pieces on top of it, with two ranks as two threads of this
// process sharing a FileStore (Gloo over loopback, as in c10d's own C++ tests).
#include "seqmix/dist/communicator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <future>
#include <thread>

#include "child_process.h"
#include "seqmix/dist/gradient_averager.h"
#include "seqmix/dist/metric_reduction.h"
#include "support/error_of.h"

namespace seqmix::dist {
namespace {
using seqmix::testing::error_of;
using seqmix::testing::scratch_path;

// A fresh FileStore path per job (a store file left by another job would mix the two).
std::string fresh_store_path(const std::string& name) { return scratch_path(name).string(); }

std::shared_ptr<Communicator> join_rank(const std::string& store, int rank, int world_size, int timeout_s = 30) {
  InitOptions options;
  options.init_method = "file://" + store;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = std::chrono::seconds(timeout_s);
  return Communicator::join(options);
}

// Runs body(rank, communicator) on two ranks at once; rethrows the first failure.
void on_two_ranks(const std::string& name, const std::function<void(int, const std::shared_ptr<Communicator>&)>& body) {
  const std::string store = fresh_store_path(name);
  auto rank_job = [&](int rank) { body(rank, join_rank(store, rank, 2)); };
  auto other = std::async(std::launch::async, rank_job, 1);
  rank_job(0);
  other.get();
}

TEST(Communicator, CollectivesCombineBothRanks) {
  on_two_ranks("collectives", [](int rank, const std::shared_ptr<Communicator>& shared) {
    Communicator& c = *shared;
    EXPECT_EQ(c.rank(), rank);
    EXPECT_EQ(c.world_size(), 2);
    auto sum = torch::tensor({1.0 + rank, 10.0 * rank});
    c.all_reduce_sum(sum, "a test tensor");
    EXPECT_TRUE(torch::equal(sum, torch::tensor({3.0, 10.0})));
    auto max = torch::tensor({static_cast<int64_t>(rank), static_cast<int64_t>(5 - rank)});
    c.all_reduce_max(max, "a test tensor");
    EXPECT_TRUE(torch::equal(max, torch::tensor({int64_t{1}, int64_t{5}})));
    std::vector<at::Tensor> weights{torch::full({2, 3}, 7.0f + static_cast<float>(rank)), torch::full({1}, -1.0f * rank)};
    c.broadcast(weights, "test weights");
    EXPECT_TRUE(torch::equal(weights[0], torch::full({2, 3}, 7.0f)));
    EXPECT_TRUE(torch::equal(weights[1], torch::zeros({1})));
    const auto gathered = c.all_gather(torch::tensor({rank * 2, rank * 2 + 1}), "ranks");
    ASSERT_EQ(gathered.size(), 2u);
    EXPECT_TRUE(torch::equal(gathered[1], torch::tensor({2, 3})));
    std::vector<at::Tensor> several{torch::ones({4}) * (rank + 1), torch::ones({2}, torch::kFloat64) * rank};
    c.all_reduce_sum_all(several, "buckets");
    EXPECT_TRUE(torch::equal(several[0], torch::full({4}, 3.0f)));
    EXPECT_TRUE(torch::equal(several[1], torch::full({2}, 1.0, torch::kFloat64)));
    c.check_same(42, "the answer");
  });
}

TEST(Communicator, CheckSameNamesTheDisagreement) {
  on_two_ranks("check_same", [](int rank, const std::shared_ptr<Communicator>& shared) {
    Communicator& c = *shared;
    const std::string message = error_of([&] { c.check_same(100 + rank, "the number of model parameters"); });
    EXPECT_NE(message.find("the ranks disagree on the number of model parameters (from 100 to 101"), std::string::npos)
        << message;
  });
}

TEST(Communicator, AverageOfGradientsInSeveralBuckets) {
  on_two_ranks("gradients", [](int rank, const std::shared_ptr<Communicator>& shared) {
    Communicator& c = *shared;
    // Same shapes on both ranks, different gradients; 40-byte buckets force several buckets, and the
    // double parameter its own.
    std::vector<at::Tensor> parameters{torch::zeros({3}, torch::requires_grad()), torch::zeros({2, 4}, torch::requires_grad()),
                                       torch::zeros({5}, torch::requires_grad()),
                                       torch::zeros({2}, torch::TensorOptions(torch::kFloat64).requires_grad(true)),
                                       torch::zeros({6}, torch::requires_grad())};
    const float r = static_cast<float>(rank);
    parameters[0].mutable_grad() = torch::arange(3, torch::kFloat32) + r;
    parameters[1].mutable_grad() = torch::full({2, 4}, 2.0f * r);
    if (rank == 1) parameters[2].mutable_grad() = torch::full({5}, 4.0f);  // an expert only rank 1 used
    parameters[3].mutable_grad() = torch::tensor({1.0, -1.0}, torch::kFloat64) * (rank + 1);
    // parameters[4]: no gradient on either rank.
    GradientAverager averager(shared, parameters, 40);
    EXPECT_GE(averager.bucket_count(), 4u);
    averager.average();
    EXPECT_TRUE(torch::equal(parameters[0].grad(), torch::arange(3, torch::kFloat32) + 0.5f));
    EXPECT_TRUE(torch::equal(parameters[1].grad(), torch::full({2, 4}, 1.0f)));
    ASSERT_TRUE(parameters[2].grad().defined());
    EXPECT_TRUE(torch::equal(parameters[2].grad(), torch::full({5}, 2.0f)));
    EXPECT_TRUE(torch::equal(parameters[3].grad(), torch::tensor({1.5, -1.5}, torch::kFloat64)));
    EXPECT_FALSE(parameters[4].grad().defined());
  });
}

TEST(Communicator, MetricSumsAddUpAcrossRanksEvenWithAMetricOneRankLacks) {
  on_two_ranks("metrics", [](int rank, const std::shared_ptr<Communicator>& shared) {
    Communicator& c = *shared;
    MetricSums local;
    local.add("loss", 2.0 + rank, 1.0);
    if (rank == 0) local.add("accuracy", 0.75, 1.0);  // rank 1's shard scored nothing
    const auto values = all_reduce_metric_sums(c, local).values();
    ASSERT_EQ(values.size(), 2u);
    EXPECT_DOUBLE_EQ(values.at("loss"), 2.5);
    EXPECT_DOUBLE_EQ(values.at("accuracy"), 0.75);
  });
}

TEST(Communicator, APeerThatLeavesFailsTheCollectiveWithAnError) {
  const std::string store = fresh_store_path("peer_leaves");
  std::promise<void> left;
  auto leaver = std::async(std::launch::async, [&] {
    auto c = join_rank(store, 1, 2, 10);
    auto t = torch::ones({1});
    c->all_reduce_sum(t, "a first tensor");
    c.reset();  // this rank's process group is gone, as when its process exits
    left.set_value();
  });
  auto c = join_rank(store, 0, 2, 10);
  auto t = torch::ones({1});
  c->all_reduce_sum(t, "a first tensor");
  left.get_future().wait();
  leaver.get();
  auto big = torch::ones({1 << 16});
  const std::string message = error_of([&] { c->all_reduce_sum(big, "the gradients"); });
  EXPECT_NE(message.find("distributed: rank 0 of 2 (gloo, file://"), std::string::npos) << message;
  EXPECT_NE(message.find("all-reduce of the gradients failed"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Communicator, MalformedJobsAreOneLineErrors) {
  InitOptions options;
  options.init_method = "tcp://127.0.0.1:1234";
  EXPECT_NE(error_of([&] { Communicator::join(options); }).find("unknown init method 'tcp://127.0.0.1:1234'"),
            std::string::npos);
  options.init_method = "file://" + fresh_store_path("malformed");
  options.rank = 2;
  options.world_size = 2;
  EXPECT_NE(error_of([&] { Communicator::join(options); }).find("rank 2 must be in 0..1 for world size 2"), std::string::npos);
  options.world_size = 0;
  EXPECT_NE(error_of([&] { Communicator::join(options); }).find("world size 0 must be in 1..4096"), std::string::npos);
  options.init_method = "file://";
  EXPECT_NE(error_of([&] { Communicator::join(options); }).find("file://PATH needs a path"), std::string::npos);
  options.timeout = std::chrono::seconds(0);
  EXPECT_NE(error_of([&] { Communicator::join(options); }).find("timeout must be at least 1 second"), std::string::npos);
}

TEST(Communicator, OneRankJobWorks) {
  auto c = join_rank(fresh_store_path("single"), 0, 1);
  auto t = torch::tensor({1.5});
  c->all_reduce_sum(t, "a tensor");
  EXPECT_EQ(t.item<double>(), 1.5);
}

}  // namespace
}  // namespace seqmix::dist

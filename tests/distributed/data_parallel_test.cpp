// DistributedDataParallel: R ranks × batch B train exactly as one process × batch R·B, every
// rank holds the same bits after every step, and bucketing changes nothing.
#include <gtest/gtest.h>

#include "relative_error.h"
#include "rank_util.h"

namespace qflow::distributed {
namespace {

using testing::global_batch;
using testing::same_on_all_ranks;
using testing::small_net;
using testing::shard_rows;
using testing::world;
using testing_util::relative_error;

constexpr int64_t kBatch = 4;  // per rank
constexpr int kSteps = 3;

nn::optim::SGD sgd(const nn::ModulePtr& m) {
  return nn::optim::SGD(m->parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
}

// One process, the whole global batch each step.
nn::ModulePtr train_alone(nn::ModulePtr net, int64_t global) {
  auto opt = sgd(net);
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = global_batch(s, global);
    opt.zero_grad();
    cross_entropy((*net)(x), y).backward();
    opt.step();
  }
  return net;
}

// This rank's share of each global batch, through DDP; `check` runs after every step.
template <class Check>
std::shared_ptr<DistributedDataParallel> train_ddp(nn::ModulePtr net, DataParallelOptions options, Check check) {
  auto ddp = std::make_shared<DistributedDataParallel>(net, options);
  auto opt = sgd(net);
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = global_batch(s, kBatch * world().size());
    opt.zero_grad();
    cross_entropy((*ddp)(shard_rows(x)), shard_rows(y)).backward();
    ddp->synchronize_gradients();
    opt.step();
    check(*net, s);
  }
  return ddp;
}

void expect_close_to(const nn::Module& got, const nn::Module& want, double tolerance) {
  const auto g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_LE(relative_error(g[i].second, w[i].second), tolerance) << g[i].first;
  const auto gb = got.named_buffers(), wb = want.named_buffers();
  ASSERT_EQ(gb.size(), wb.size());
  for (size_t i = 0; i < gb.size(); ++i) {
    if (!is_floating(gb[i].second.dtype())) continue;
    EXPECT_LE(relative_error(gb[i].second, wb[i].second), tolerance) << gb[i].first;
  }
}

void expect_identical_everywhere(const nn::Module& m, int step) {
  for (const auto& [name, p] : m.named_parameters()) EXPECT_TRUE(same_on_all_ranks(p)) << name << " after step " << step;
  for (const auto& [name, b] : m.named_buffers()) EXPECT_TRUE(same_on_all_ranks(b)) << name << " after step " << step;
}

// The tolerance: float32 sums over B and R·B images in another order, three SGD steps.
constexpr double kTolerance = 1e-5;

TEST(DistributedDataParallel, EqualsOneProcessWithTheGlobalBatch) {
  QFLOW_NEEDS_RANKS(2);
  auto alone = train_alone(small_net(false), kBatch * world().size());
  auto net = small_net(false);
  train_ddp(net, {}, expect_identical_everywhere);
  expect_close_to(*net, *alone, kTolerance);
}

TEST(DistributedDataParallel, SyncBatchNormEqualsOneProcessWithTheGlobalBatch) {
  QFLOW_NEEDS_RANKS(2);
  auto alone = train_alone(small_net(true), kBatch * world().size());
  auto net = small_net(true);
  auto gm = fx::symbolic_trace(net, zeros({1, 3, 8, 8}));  // shares net's tensors
  EXPECT_EQ(convert_sync_batchnorm(*gm), 2);
  train_ddp(gm, {}, expect_identical_everywhere);
  expect_close_to(*net, *alone, kTolerance);  // running statistics included
}

TEST(DistributedDataParallel, PerRankBatchNormKeepsReplicasIdentical) {
  QFLOW_NEEDS_RANKS(2);
  // Per-rank statistics (PyTorch's default): not the global batch's, but rank 0's running
  // statistics are broadcast at every forward, so the replicas still hold the same bits.
  auto net = small_net(true);
  train_ddp(net, {}, [](const nn::Module&, int) {});
  auto ddp = std::make_shared<DistributedDataParallel>(net);  // broadcasts rank 0's buffers
  expect_identical_everywhere(*net, kSteps);
}

TEST(DistributedDataParallel, BucketedEqualsUnbucketed) {
  QFLOW_NEEDS_RANKS(2);
  auto one_each = small_net(false), one_bucket = small_net(false);
  auto a = train_ddp(one_each, {.bucket_cap_mb = 0}, [](const nn::Module&, int) {});
  auto b = train_ddp(one_bucket, {.bucket_cap_mb = 1000}, [](const nn::Module&, int) {});
  EXPECT_EQ(a->bucket_layout().size(), one_each->parameters().size());
  EXPECT_EQ(b->bucket_layout().size(), 1u);
  EXPECT_EQ(a->stats().rounds, kSteps);
  const auto pa = one_each->parameters(), pb = one_bucket->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(relative_error(pa[i], pb[i]), 0.0) << "parameter " << i;
}

TEST(DistributedDataParallel, BucketsFollowReverseRegistrationOrder) {
  auto net = small_net(false);  // 6 tensors: conv1 w/b, conv2 w/b, fc w/b
  if (world().size() == 1) {
    DistributedDataParallel ddp(net, {.bucket_cap_mb = 0});
    EXPECT_TRUE(ddp.bucket_layout().empty());  // a world of one averages nothing
    return;
  }
  DistributedDataParallel ddp(net, {.bucket_cap_mb = 0});
  const auto layout = ddp.bucket_layout();
  ASSERT_EQ(layout.size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(layout[k], std::vector<size_t>{5 - k});
  // 1 KiB buckets: each closes once it holds at least 1 KiB.
  DistributedDataParallel small(net, {.bucket_cap_mb = 1.0 / 1024});
  std::vector<size_t> all;
  for (const auto& b : small.bucket_layout()) all.insert(all.end(), b.begin(), b.end());
  EXPECT_EQ(all, (std::vector<size_t>{5, 4, 3, 2, 1, 0}));
}

TEST(DistributedDataParallel, StartsFromRankZerosWeights) {
  QFLOW_NEEDS_RANKS(2);
  manual_seed(static_cast<uint64_t>(world().rank()));  // different weights on every rank
  auto net = std::make_shared<nn::Linear>(nn::LinearOptions{.in = 3, .out = 2});
  EXPECT_FALSE(same_on_all_ranks(net->weight));
  DistributedDataParallel ddp(net);
  EXPECT_TRUE(same_on_all_ranks(net->weight));
  EXPECT_TRUE(same_on_all_ranks(net->bias));
}

TEST(DistributedDataParallel, UnusedParameterCountsAsZero) {
  QFLOW_NEEDS_RANKS(2);
  // Two heads; rank 0 uses both, the others only the first: rank 0's gradient of the second is
  // averaged with the others' zeros.
  manual_seed(3);
  auto net = std::make_shared<nn::Sequential>(nn::Linear({.in = 2, .out = 2}), nn::Linear({.in = 2, .out = 1}));
  DistributedDataParallel ddp(net);
  const Tensor x = ones({1, 2});
  Tensor h = (*(*net)[0])(x);
  Tensor loss = h.sum();
  if (world().rank() == 0) loss = loss + (*(*net)[1])(h).sum();
  loss.backward();
  ddp.synchronize_gradients();
  const Tensor g = (*net)[1]->named_parameters()[1].second.grad();  // the second head's bias
  ASSERT_TRUE(g.defined());
  EXPECT_FLOAT_EQ(g.item<float>(), 1.0f / static_cast<float>(world().size()));
  EXPECT_TRUE(same_on_all_ranks((*net)[0]->parameters()[0].grad()));
}

TEST(DistributedDataParallel, WorldOfOneIsPlainTraining) {
  if (world().size() != 1) GTEST_SKIP() << "single-process behaviour";
  auto alone = train_alone(small_net(false), kBatch);
  auto net = small_net(false);
  train_ddp(net, {}, [](const nn::Module&, int) {});
  const auto a = alone->parameters(), b = net->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(relative_error(b[i], a[i]), 0.0);
}

}  // namespace
}  // namespace qflow::distributed

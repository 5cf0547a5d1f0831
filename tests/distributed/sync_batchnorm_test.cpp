// SyncBatchNorm: in a world of one it is BatchNorm (values, gradients, running statistics,
// state_dict); across ranks it normalizes with the global batch's statistics.
#include <gtest/gtest.h>

#include "qflow/autograd/gradcheck.h"
#include "relative_error.h"
#include "rank_util.h"

namespace qflow::distributed {
namespace {

using testing::shard_rows;
using testing::world;
using testing_util::relative_error;

Tensor input(int64_t n) {
  manual_seed(11);
  return randn({n, 3, 4, 5}) * 2.0 + 0.5;
}

TEST(SyncBatchNorm, WorldOfOneEqualsBatchNorm) {
  if (world().size() != 1) GTEST_SKIP() << "single-process behaviour";
  for (const bool affine : {true, false}) {
    nn::BatchNorm2d bn({.features = 3, .affine = affine});
    SyncBatchNorm sync({.features = 3, .affine = affine});
    const Tensor x = input(6);
    Tensor xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
    const Tensor w = randn({6, 3, 4, 5});
    for (int step = 0; step < 2; ++step) {
      const Tensor ya = bn(xa), yb = sync(xb);
      EXPECT_LE(relative_error(yb, ya), 1e-6);
      (ya * w).sum().backward();
      (yb * w).sum().backward();
    }
    EXPECT_LE(relative_error(xb.grad(), xa.grad()), 1e-5);
    if (affine) {
      EXPECT_LE(relative_error(sync.weight.grad(), bn.weight.grad()), 1e-5);
      EXPECT_LE(relative_error(sync.bias.grad(), bn.bias.grad()), 1e-5);
    }
    EXPECT_LE(relative_error(sync.running_mean, bn.running_mean), 1e-6);
    EXPECT_LE(relative_error(sync.running_var, bn.running_var), 1e-6);
    EXPECT_EQ(sync.num_batches_tracked.item<int64_t>(), 2);
    bn.eval(), sync.eval();
    EXPECT_LE(relative_error(sync(x), bn(x)), 1e-6);
  }
}

TEST(SyncBatchNorm, Gradcheck) {
  if (world().size() != 1) GTEST_SKIP() << "gradcheck perturbs one rank's inputs";
  SyncBatchNorm sync({.features = 2, .momentum = std::nullopt});
  sync.to(DType::Float64);
  manual_seed(5);
  Tensor x = randn({3, 2, 2, 3}, DType::Float64).requires_grad_();
  TensorList inputs{x, sync.weight, sync.bias};
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return sync(in[0]); }, inputs));
  SyncBatchNorm flat({.features = 4});
  flat.to(DType::Float64);
  Tensor x2 = randn({5, 4}, DType::Float64).requires_grad_();
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return flat(in[0]); }, {x2, flat.weight, flat.bias}));
}

TEST(SyncBatchNorm, AcrossRanksUsesTheGlobalBatch) {
  QFLOW_NEEDS_RANKS(2);
  nn::BatchNorm2d bn({.features = 3});
  SyncBatchNorm sync({.features = 3});
  const Tensor x = input(4 * world().size());
  Tensor whole = x.clone().requires_grad_();
  Tensor mine = shard_rows(x).requires_grad_();
  const Tensor y = bn(whole);
  EXPECT_LE(relative_error(sync(mine), shard_rows(y)), 1e-5);
  EXPECT_LE(relative_error(sync.running_var, bn.running_var), 1e-6);
  // d/dx of the global sum of y·w: every rank's inputs reach every rank's outputs.
  manual_seed(9);
  const Tensor w = randn(y.sizes());
  (y * w).sum().backward();
  (sync(mine) * shard_rows(w)).sum().backward();
  EXPECT_LE(relative_error(mine.grad(), shard_rows(whole.grad())), 1e-5);
}

TEST(SyncBatchNorm, RefusesBadInput) {
  SyncBatchNorm sync({.features = 3});
  try {
    sync(zeros({2, 4, 3, 3}));
    FAIL() << "4 channels accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("SyncBatchNorm: expected 3 channels, got input of shape [2, 4, 3, 3]"), std::string::npos)
        << e.message();
  }
  EXPECT_THROW(sync(zeros({3})), Error);
  if (world().size() == 1) {
    EXPECT_THROW(sync(zeros({1, 3})), Error);  // one value per channel
  }
}

TEST(ConvertSyncBatchNorm, SharesTensorsStateDictAndMode) {
  auto net = testing::small_net(true);
  net->eval();
  auto gm = fx::symbolic_trace(net, zeros({1, 3, 8, 8}));
  const auto before = gm->state_dict();
  EXPECT_EQ(convert_sync_batchnorm(*gm), 2);
  int64_t sync = 0;
  for (const auto& m : gm->modules())
    if (auto* s = dynamic_cast<SyncBatchNorm*>(m.get())) {
      ++sync;
      EXPECT_FALSE(s->is_training());
    }
  EXPECT_EQ(sync, 2);
  // The same tensors as the traced model's BatchNorms: training one trains the other.
  auto bn = std::dynamic_pointer_cast<SyncBatchNorm>(gm->get_submodule("1"));
  ASSERT_NE(bn, nullptr) << gm->code();
  EXPECT_TRUE(bn->weight.is_same(net->named_parameters()[2].second));
  EXPECT_EQ(gm->state_dict().keys(), before.keys());
  EXPECT_EQ(convert_sync_batchnorm(*gm), 0);
}

TEST(SyncBatchNorm, TracingLeavesItsStatisticsAlone) {
  // symbolic_trace runs a leaf's forward on proxies to learn its output sizes: no statistic
  // may move (and no collective sees a proxy: the world's sums are of plain numbers).
  auto net = testing::small_net(true);
  auto gm = fx::symbolic_trace(net, zeros({2, 3, 8, 8}));
  convert_sync_batchnorm(*gm);
  gm->train();
  auto again = fx::symbolic_trace(gm, zeros({2, 3, 8, 8}));
  EXPECT_NE(std::dynamic_pointer_cast<SyncBatchNorm>(again->get_submodule("1")), nullptr) << again->code();
  for (const auto& [name, b] : net->named_buffers()) {
    if (name.find("num_batches_tracked") != std::string::npos) {
      EXPECT_EQ(b.item<int64_t>(), 0) << name;
    } else if (name.find("running_mean") != std::string::npos) {
      EXPECT_EQ(b.abs().max().item<float>(), 0.0f) << name;
    }
  }
  // One training step counts one batch.
  (*again)(randn({4, 3, 8, 8}));
  for (const auto& [name, b] : net->named_buffers()) {
    if (name.find("num_batches_tracked") != std::string::npos) {
      EXPECT_EQ(b.item<int64_t>(), 1) << name;
    }
  }
}

}  // namespace
}  // namespace qflow::distributed


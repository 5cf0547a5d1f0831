// QAT under DistributedDataParallel: synchronised observers keep every rank's quantization
// identical, so the deploy model is the same whichever rank builds it.
#include <gtest/gtest.h>

#include "rank_util.h"

namespace qflow::distributed {
namespace {

using testing::global_batch;
using testing::same_on_all_ranks;
using testing::shard_rows;
using testing::small_net;
using testing::world;

struct QatRun {
  std::shared_ptr<fx::GraphModule> float_gm, qat;
  Tensor example;
};

QatRun qat_model(const quant::QConfig& qc) {
  QatRun r;
  r.example = zeros({1, 3, 8, 8});
  r.float_gm = fx::symbolic_trace(small_net(true), r.example);
  r.qat = quant::quantization_aware_training(*r.float_gm, r.example, qc);
  return r;
}

class DistributedQat : public ::testing::TestWithParam<bool> {};  // per channel?

TEST_P(DistributedQat, ObserversAndDeployModelsAgreeOnEveryRank) {
  QFLOW_NEEDS_RANKS(2);
  const quant::QConfig qc{.per_layer = !GetParam()};
  QatRun run = qat_model(qc);
  DistributedDataParallel ddp(run.qat);
  int64_t observers = 0;
  for (const auto& m : run.qat->modules())
    if (auto* obs = dynamic_cast<quant::Observer*>(m.get())) {
      EXPECT_TRUE(obs->has_range_sync());
      ++observers;
    }
  ASSERT_GT(observers, 3);
  nn::optim::SGD opt(run.qat->parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int s = 0; s < 3; ++s) {
    // Each rank's share has its own range; only the allreduce makes them agree.
    auto [x, y] = global_batch(s, 4 * world().size());
    const Tensor mine = shard_rows(x) * static_cast<double>(world().rank() + 1);
    opt.zero_grad();
    cross_entropy(ddp(mine), shard_rows(y)).backward();
    ddp.synchronize_gradients();
    opt.step();
    for (const auto& [name, m] : run.qat->named_modules())
      if (auto* obs = dynamic_cast<quant::Observer*>(m.get())) {
        EXPECT_TRUE(same_on_all_ranks(obs->min_val())) << name << ".min_val after step " << s;
        EXPECT_TRUE(same_on_all_ranks(obs->max_val())) << name << ".max_val after step " << s;
      }
    for (const auto& [name, p] : run.qat->named_parameters()) EXPECT_TRUE(same_on_all_ranks(p)) << name;
  }
  ddp.broadcast_buffers();  // the folded BatchNorms' running statistics: rank 0's
  auto deploy = quant::dequantization_aware_training(*run.float_gm, *run.qat, run.example, qc);
  for (const auto& [name, t] : deploy->state_dict()) EXPECT_TRUE(same_on_all_ranks(t)) << "deploy " << name;
  deploy->eval();
  manual_seed(7);
  EXPECT_TRUE(same_on_all_ranks((*deploy)(randn({2, 3, 8, 8}))));
}

INSTANTIATE_TEST_SUITE_P(PerLayerAndPerChannel, DistributedQat, ::testing::Bool());

TEST(SynchronizedObservers, RecordTheGlobalBatchRange) {
  QFLOW_NEEDS_RANKS(2);
  quant::MinMaxObserver obs;
  EXPECT_EQ(synchronize_observers(obs), 1);
  obs.train();
  const auto r = static_cast<float>(world().rank());
  obs(from_vector<float>({-1 - r, 2 * r}));
  const auto last = static_cast<float>(world().size() - 1);
  EXPECT_EQ(obs.min_val().item<float>(), -1 - last);
  EXPECT_EQ(obs.max_val().item<float>(), 2 * last);
}

TEST(SynchronizedObservers, WorldOfOneInstallsNothing) {
  if (world().size() != 1) GTEST_SKIP() << "single-process behaviour";
  quant::MovingAverageMinMaxObserver obs;
  EXPECT_EQ(synchronize_observers(obs), 1);
  EXPECT_FALSE(obs.has_range_sync());
}

}  // namespace
}  // namespace qflow::distributed

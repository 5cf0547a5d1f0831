// Observers: hand-computed update sequences, modes (train/eval/frozen), buffers in state_dict,
// cloning, freeze_observers.
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using quant_test::error_of;
using quant_test::values;
using quant_test::vec;

namespace {

TEST(MinMaxObserverTest, StartsEmptyAndRecordsTheLatestRange) {
  MinMaxObserver obs;
  EXPECT_THAT(values(obs.min_val()), ElementsAre(0.0f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(0.0f));
  EXPECT_EQ(obs.num_observations(), 0);
  EXPECT_FALSE(obs.is_frozen());
  EXPECT_THAT(values(obs.calculate_qparams().scale), ElementsAre(0.0f));  // identity until observed

  const Tensor x = vec({-1.0f, 3.0f, 2.0f});
  EXPECT_TRUE(obs(x).is_same(x));  // returns its input
  EXPECT_THAT(values(obs.min_val()), ElementsAre(-1.0f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(3.0f));
  EXPECT_THAT(values(obs.calculate_qparams().scale), ElementsAre(3.0f / 127.0f));
  // The next tensor replaces the range (weights move every step; no stale history).
  obs(vec({0.5f, 1.0f}));
  EXPECT_THAT(values(obs.min_val()), ElementsAre(0.5f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(1.0f));
  EXPECT_EQ(obs.num_observations(), 2);
  EXPECT_THAT(values(obs.calculate_qparams().scale), ElementsAre(1.0f / 127.0f));
}

TEST(MinMaxObserverTest, PerChannelAlongAxisZero) {
  MinMaxObserver obs({.qconfig = {.scheme = Scheme::Affine, .per_layer = false}, .channels = 2});
  obs(from_vector<float>({-1.0f, 0.5f, 2.0f, 4.0f, 1.0f, 6.1f, 3.0f, 2.0f}, {2, 2, 2}));
  EXPECT_THAT(values(obs.min_val()), ElementsAre(-1.0f, 1.0f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(4.0f, 6.1f));
  const QParams qp = obs.calculate_qparams();
  EXPECT_TRUE(qp.per_channel());
  // Channel 1's range [1, 6.1] is widened to [0, 6.1] for the qparams (the observer keeps 1).
  EXPECT_THAT(values(qp.scale), ElementsAre(5.0f / 255.0f, 6.1f / 255.0f));
  EXPECT_THAT(values(qp.zero_point), ElementsAre(51.0f, 0.0f));  // -round(-51), -round(0)
  EXPECT_THAT(error_of([&] { obs(zeros({3, 2})); }),
              HasSubstr("MinMaxObserver: expected 2 channels along axis 0, got a tensor of shape [3, 2]"));
}

TEST(MinMaxObserverTest, RecordsOnlyInTrainingModeAndWhenNotFrozen) {
  MinMaxObserver obs;
  obs(vec({-2.0f, 2.0f}));
  obs.eval();
  obs(vec({-9.0f, 9.0f}));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(2.0f));
  obs.train();
  obs.freeze();
  EXPECT_TRUE(obs.is_frozen());
  obs(vec({-9.0f, 9.0f}));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(2.0f));
  EXPECT_EQ(obs.num_observations(), 1);
  obs.freeze(false);
  obs(vec({-9.0f, 9.0f}));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(9.0f));
  EXPECT_EQ(obs.num_observations(), 2);
}

TEST(MovingAverageObserverTest, SymmetricTracksTheAbsoluteMaximum) {
  MovingAverageMinMaxObserver obs({.qconfig = {.momentum = 0.9}});
  obs(vec({-1.0f, 2.0f}));  // seeds: a = 2
  EXPECT_THAT(values(obs.min_val()), ElementsAre(-2.0f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(2.0f));
  obs(vec({-4.0f, 1.0f}));  // a = 0.9 · 2 + 0.1 · 4 = 2.2
  EXPECT_FLOAT_EQ(values(obs.max_val())[0], 2.2f);
  EXPECT_FLOAT_EQ(values(obs.min_val())[0], -2.2f);
  obs(vec({0.0f, 0.5f}));  // a = 0.9 · 2.2 + 0.1 · 0.5 = 2.03
  EXPECT_FLOAT_EQ(values(obs.max_val())[0], 2.03f);
  EXPECT_FLOAT_EQ(values(obs.min_val())[0], -2.03f);
  EXPECT_EQ(obs.num_observations(), 3);
  EXPECT_FLOAT_EQ(values(obs.calculate_qparams().scale)[0], 2.03f / 127.0f);
  // Bit for bit, the float32 expression of the issue.
  const float m = 0.9f;
  const float a2 = m * 2.0f + (1.0f - m) * 4.0f;
  EXPECT_EQ(values(obs.max_val())[0], m * a2 + (1.0f - m) * 0.5f);
}

TEST(MovingAverageObserverTest, AffineTracksMinAndMaxSeparately) {
  MovingAverageMinMaxObserver obs({.qconfig = {.scheme = Scheme::Affine, .momentum = 0.5}});
  obs(vec({-1.0f, 2.0f}));
  obs(vec({1.0f, 4.0f}));  // min 0.5 · −1 + 0.5 · 1 = 0, max 0.5 · 2 + 0.5 · 4 = 3
  EXPECT_THAT(values(obs.min_val()), ElementsAre(0.0f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(3.0f));
  EXPECT_THAT(values(obs.calculate_qparams().scale), ElementsAre(3.0f / 255.0f));
  obs(vec({-3.0f, 3.0f}));  // min −1.5, max 3
  EXPECT_THAT(values(obs.min_val()), ElementsAre(-1.5f));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(3.0f));
  EXPECT_THAT(values(obs.calculate_qparams().zero_point), ElementsAre(85.0f));  // -round(-1.5 / (4.5 / 255)) = 85
}

TEST(MovingAverageObserverTest, MomentumZeroFollowsTheLatestBatch) {
  MovingAverageMinMaxObserver obs({.qconfig = {.momentum = 0.0}});
  obs(vec({-1.0f, 2.0f}));
  obs(vec({0.25f}));
  EXPECT_THAT(values(obs.max_val()), ElementsAre(0.25f));
}

TEST(MovingAverageObserverTest, StatisticsLiveInTheStateDictAndResume) {
  MovingAverageMinMaxObserver obs({.qconfig = {.momentum = 0.5}});
  obs(vec({-1.0f, 2.0f}));
  obs.freeze();
  EXPECT_EQ(obs.state_dict().keys(), (std::vector<std::string>{"min_val", "max_val", "num_batches_tracked", "frozen"}));
  MovingAverageMinMaxObserver restored({.qconfig = {.momentum = 0.5}});
  restored.load_state_dict(obs.state_dict());
  EXPECT_TRUE(restored.is_frozen());
  EXPECT_EQ(restored.num_observations(), 1);
  restored.freeze(false);
  restored(vec({-4.0f}));  // continues the average instead of seeding: 0.5 · 2 + 0.5 · 4
  EXPECT_THAT(values(restored.max_val()), ElementsAre(3.0f));
}

TEST(ObserverTest, CloneCopiesTheStatisticsAndIsIndependent) {
  auto obs = std::make_shared<MinMaxObserver>();
  (*obs)(vec({-1.0f, 3.0f}));
  auto copy = std::dynamic_pointer_cast<MinMaxObserver>(obs->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_THAT(values(copy->max_val()), ElementsAre(3.0f));
  EXPECT_EQ(copy->num_observations(), 1);
  (*copy)(vec({5.0f}));
  EXPECT_THAT(values(obs->max_val()), ElementsAre(3.0f));
  EXPECT_THAT(values(copy->max_val()), ElementsAre(5.0f));
}

TEST(ObserverTest, FreezeObserversWalksTheTree) {
  nn::Sequential seq{MinMaxObserver(), nn::ReLU(), MovingAverageMinMaxObserver()};
  auto q = std::make_shared<QLinear>(nn::LinearOptions{.in = 2, .out = 2});
  seq.push_back(q);
  EXPECT_EQ(freeze_observers(seq), 4);  // two here, two inside the QLinear
  EXPECT_TRUE(q->input_observer->is_frozen());
  EXPECT_TRUE(q->weight_observer->is_frozen());
  EXPECT_TRUE(seq.state_dict().at("0.frozen").item<bool>());
  EXPECT_EQ(freeze_observers(seq, false), 4);
  EXPECT_FALSE(q->weight_observer->is_frozen());
}

TEST(ObserverTest, RejectsBadOptions) {
  EXPECT_THAT(error_of([] { MovingAverageMinMaxObserver({.channels = 3}); }),
              HasSubstr("MovingAverageMinMaxObserver: only per-tensor ranges are supported, got channels=3"));
  EXPECT_THAT(error_of([] { MinMaxObserver({.qconfig = {.bits = 1}}); }), HasSubstr("bits must be in 2..16, got 1"));
}

}  // namespace

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/nn/init.h"
#include "qflow/qflow.h"

using namespace qflow;
namespace init = qflow::nn::init;

TEST(InitTest, FanInAndFanOutOfAConvWeight) {
  Tensor w = empty({16, 3, 5, 5});
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(w), (std::pair<int64_t, int64_t>{75, 400}));
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({4})), Error);
}

TEST(InitTest, GainsMatchTorch) {
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Tanh), 5.0 / 3.0);
  // PyTorch's default Conv/Linear init: leaky_relu gain with a = sqrt(5) → bound = 1/sqrt(fan_in).
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyReLU, std::sqrt(5.0)), std::sqrt(2.0 / 6.0));
}

TEST(InitTest, KaimingUniformWithSqrt5HasPyTorchsDefaultBoundAndSpread) {
  Tensor w = empty({256, 64, 3, 3});
  init::kaiming_uniform_(w, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(64.0 * 9.0);
  EXPECT_LE(w.amax().item<double>(), bound);
  EXPECT_GE(w.amin().item<double>(), -bound);
  // U(-b, b) has variance b²/3.
  EXPECT_NEAR(w.var().item<double>(), bound * bound / 3.0, 0.02 * bound * bound / 3.0);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.01 * bound);
}

TEST(InitTest, KaimingNormalAndXavierSpreads) {
  Tensor w = empty({512, 256});
  init::kaiming_normal_(w, 0.0, init::FanMode::FanOut, init::Nonlinearity::ReLU);
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / 512.0), 0.01 * std::sqrt(2.0 / 512.0));
  init::xavier_uniform_(w);
  const double b = std::sqrt(6.0 / (512.0 + 256.0));
  EXPECT_LE(w.amax().item<double>(), b);
  EXPECT_NEAR(w.var().item<double>(), b * b / 3.0, 0.02 * b * b / 3.0);
}

TEST(InitTest, SameSeedSameWeightsAndNoHistory) {
  Tensor a = empty({4, 4}).requires_grad_();
  Tensor b = empty({4, 4}).requires_grad_();
  manual_seed(7);
  init::normal_(a, 1.0, 2.0);
  manual_seed(7);
  init::normal_(b, 1.0, 2.0);
  EXPECT_EQ(to_vector<float>(a), to_vector<float>(b));
  EXPECT_TRUE(a.is_leaf());
  init::constant_(a, 3.0);
  EXPECT_EQ(to_vector<float>(a), std::vector<float>(16, 3.0f));
}

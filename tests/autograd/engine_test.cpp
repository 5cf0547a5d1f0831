#include <gtest/gtest.h>

#include "qflow/qflow.h"

using namespace qflow;

TEST(EngineTest, MulBackwardGivesOtherOperand) {
  Tensor a = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor b = from_vector<double>({4, 5, 6}).requires_grad_();
  Tensor c = a * b;
  EXPECT_EQ(c.grad_fn_name(), "MulBackward");
  c.backward(from_vector<double>({1, 1, 1}));
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{1, 2, 3}));
}

TEST(EngineTest, TenThousandOpChainDoesNotOverflowTheStack) {
  Tensor x = from_vector<double>({1.0}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001 + 0.0;
  y.backward(from_vector<double>({1.0}));
  EXPECT_NEAR(x.grad().item<double>(), std::pow(1.0001, 10000), 1e-9);
}

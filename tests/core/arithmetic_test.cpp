#include <gtest/gtest.h>

#include "qflow/qflow.h"

using namespace qflow;

TEST(ArithmeticTest, AddBroadcastsRowAgainstMatrix) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ(to_vector<float>(a + b), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(ArithmeticTest, MulGradientAccumulates) {
  Tensor a = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor b = from_vector<double>({4, 5, 6}).requires_grad_();
  Tensor c = a * b;
  EXPECT_EQ(c.grad_fn_name(), "MulBackward");
}

// Gradients of cat, stack, index_select and index_add (autograd/derivatives/index.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

// Distinct, irregular float64 values that require grad; `seed` shifts the sequence.
Tensor input(const IntList& sizes, double seed = 0.0) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::cos(1.3 * static_cast<double>(i) + seed) * 1.5;
  return from_vector<double>(v, sizes).requires_grad_();
}

}  // namespace

TEST(IndexGradTest, Cat) {
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return cat({x[0], x[1]}); }, {input({2, 3}), input({1, 3}, 1.0)}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return cat({x[0], x[1], x[0]}, -1); }, {input({2, 3}), input({2, 1}, 1.0)}));
  // An input that does not require grad, and a float32 one promoted to float64.
  Tensor c = from_vector<double>({7, 8, 9}, {1, 3});
  EXPECT_TRUE(gradcheck([&](const TensorList& x) { return cat({c, x[0], from_vector<float>({1, 2, 3}, {1, 3})}); }, {input({2, 3})}));
  // Legacy (0,)-shaped inputs are skipped.
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return cat({x[1], x[0], x[1]}, 1); }, {input({2, 3}), input({0}, 2.0)}));
  Tensor a = input({2, 2});
  EXPECT_EQ(cat({a, a}).grad_fn_name(), "CatBackward");
}

TEST(IndexGradTest, CatSplitsTheGradient) {
  Tensor a = input({2, 1});
  Tensor b = input({2, 2}, 1.0);
  cat({a, b}, 1).backward(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{1, 4}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{2, 3, 5, 6}));
}

TEST(IndexGradTest, Stack) {
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return stack({x[0], x[1]}); }, {input({2, 3}), input({2, 3}, 1.0)}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return stack({x[0], x[1], x[0]}, 1); }, {input({2, 3}), input({2, 3}, 1.0)}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return stack({x[1], x[0]}, -1); }, {input({2, 3}), input({2, 3}, 1.0)}));
  Tensor a = input({2});
  EXPECT_EQ(stack({a, a}).grad_fn_name(), "StackBackward");
}

TEST(IndexGradTest, IndexSelect) {
  const Tensor rows = from_vector<int64_t>({2, 0, 2, 3});
  EXPECT_TRUE(gradcheck([&](const TensorList& x) { return x[0].index_select(0, rows); }, {input({4, 3})}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return x[0].index_select(1, from_vector<int32_t>({1, 1})); }, {input({2, 3, 2})}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return x[0].index_select(-1, scalar_tensor(2, DType::Int64)); }, {input({2, 3})}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return x[0].t().index_select(0, from_vector<int64_t>({2, 1})); }, {input({3, 3})}));
}

TEST(IndexGradTest, IndexSelectRepeatedRowsAccumulate) {
  Tensor x = input({3, 2});
  Tensor y = x.index_select(0, from_vector<int64_t>({1, 1, 0}));
  EXPECT_EQ(y.grad_fn_name(), "IndexSelectBackward");
  y.backward(from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{5, 6, 4, 6, 0, 0}));
}

TEST(IndexGradTest, IndexAdd) {
  const Tensor idx = from_vector<int64_t>({1, 1, 3});
  EXPECT_TRUE(gradcheck([&](const TensorList& x) { return index_add(x[0], 1, idx, x[1], 0.5); },
                        {input({2, 4}), input({2, 3}, 1.0)}));
  EXPECT_TRUE(gradcheck([&](const TensorList& x) { return index_add(x[0], 0, from_vector<int64_t>({2, 0}), x[1]); },
                        {input({3, 2}), input({2, 2}, 1.0)}));
}

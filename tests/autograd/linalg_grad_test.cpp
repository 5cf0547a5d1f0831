// Gradients of mm, bmm, matmul (every rank case, batch broadcasting) and addmm against
// finite differences, plus a hand-checked case.
#include <gtest/gtest.h>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

Tensor leaf(const IntList& shape) { return randn(shape, DType::Float64).requires_grad_(); }

// gradcheck of matmul(a, b) for leaves of the given shapes.
void check_matmul(const IntList& a, const IntList& b) {
  SCOPED_TRACE(::testing::Message() << "matmul " << ::testing::PrintToString(a) << " @ " << ::testing::PrintToString(b));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return matmul(x[0], x[1]); }, {leaf(a), leaf(b)}));
}

}  // namespace

TEST(LinalgGradTest, MmGradientIsHandComputed) {
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = from_vector<double>({1, -1, 0, 2, 3, 1}, {3, 2}).requires_grad_();
  Tensor c = mm(a, b);
  EXPECT_EQ(c.grad_fn_name(), "MmBackward");
  c.backward(ones({2, 2}, DType::Float64));
  // dL/da = 1 @ b^T: row sums of b; dL/db = a^T @ 1: column sums of a per row of b.
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{0, 2, 4, 0, 2, 4}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{5, 5, 7, 7, 9, 9}));
}

TEST(LinalgGradTest, MmPassesGradcheck) {
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return mm(x[0], x[1]); }, {leaf({3, 4}), leaf({4, 2})}));
  // Transposed views as inputs.
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return mm(x[0].t(), x[1].t()); }, {leaf({4, 3}), leaf({2, 4})}));
}

TEST(LinalgGradTest, BmmPassesGradcheck) {
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return bmm(x[0], x[1]); }, {leaf({2, 3, 4}), leaf({2, 4, 5})}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return bmm(x[0].transpose(1, 2), x[1]); }, {leaf({3, 4, 2}), leaf({3, 4, 3})}));
}

TEST(LinalgGradTest, AddmmPassesGradcheck) {
  Tensor a = leaf({3, 4}), b = leaf({4, 5});
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return addmm(x[0], x[1], x[2]); }, {leaf({3, 5}), a, b}));
  // Bias broadcast along rows and along columns, with beta and alpha.
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return addmm(x[0], x[1], x[2], 0.5, -2.0); }, {leaf({5}), a, b}));
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return addmm(x[0], x[1], x[2], 3.0, 0.25); }, {leaf({3, 1}), a, b}));
  Tensor c = addmm(leaf({5}), a, b);
  EXPECT_EQ(c.grad_fn_name(), "AddmmBackward");
}

TEST(LinalgGradTest, MatmulPassesGradcheckForEveryRankCase) {
  check_matmul({4}, {4});            // dot
  check_matmul({3, 4}, {4});         // matrix-vector
  check_matmul({4}, {4, 3});         // vector-matrix
  check_matmul({3, 4}, {4, 2});      // mm
  check_matmul({4}, {2, 4, 3});      // vector-batch
  check_matmul({2, 3, 4}, {4});      // batch-vector
  check_matmul({2, 3, 4}, {4, 5});   // batch-matrix (folded)
  check_matmul({3, 4}, {2, 4, 5});   // matrix-batch
  check_matmul({2, 3, 4}, {2, 4, 5});
}

TEST(LinalgGradTest, MatmulSumsGradientsOverBroadcastBatchDims) {
  check_matmul({2, 1, 3, 4}, {3, 4, 2});
  check_matmul({1, 3, 4}, {2, 2, 4, 2});
  Tensor a = leaf({2, 3, 4});
  Tensor c = matmul(a, leaf({4, 2}));
  EXPECT_EQ(c.grad_fn_name(), "MatmulBackward");
}

// Losses: cross_entropy (label smoothing, weights, ignore_index, every reduction, (N, C, d)
// and unbatched inputs), nll_loss, mse_loss, l1_loss: golden values from PyTorch 1.13
// (tests/core/goldens/nn_ops.py), backward ops against finite differences, error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "qflow/qflow.h"
#include "error_of.h"
#include "test_helpers.h"

using namespace qflow;
using ::testing::HasSubstr;
using qflow::testing_util::expect_close;
using qflow::testing_util::sin_seq;

namespace {

using qflow::testing_util::error_of;

Tensor i64(std::initializer_list<int64_t> v, const IntList& shape = {}) { return from_vector<int64_t>(v, shape); }

const Tensor& logits() {
  static const Tensor t = sin_seq({4, 5}, 0.2, 2.0);
  return t;
}
const Tensor& class_weight() {
  static const Tensor t = from_vector<float>({0.5, 1.0, 2.0, 1.5, 0.25});
  return t;
}

}  // namespace

TEST(CrossEntropyTest, PlainEveryReductionMatchesPyTorch) {
  Tensor t = i64({1, 4, 0, 3});
  expect_close(cross_entropy(logits(), t, Tensor(), Reduction::None), {2.08478594, 3.3277843, 1.27958608, 1.27367544});
  expect_close(cross_entropy(logits(), t), {1.99145794});
  expect_close(cross_entropy(logits(), t, Tensor(), Reduction::Sum), {7.96583176});
  EXPECT_EQ(cross_entropy(logits(), t).dim(), 0);
}

TEST(CrossEntropyTest, WeightIgnoreIndexAndLabelSmoothingMatchPyTorch) {
  Tensor t = i64({1, -100, 0, 3});
  expect_close(cross_entropy(logits(), t, class_weight(), Reduction::None, -100, 0.1),
               {2.05045772, 0, 0.7606498, 1.92712224});
  expect_close(cross_entropy(logits(), t, class_weight(), Reduction::Mean, -100, 0.1), {1.57940996});
  expect_close(cross_entropy(logits(), t, class_weight(), Reduction::Sum, -100, 0.1), {4.73822975});
}

TEST(CrossEntropyTest, SmoothingWeightAndIgnoreIndexSeparately) {
  Tensor t = i64({1, 4, 0, 3});
  expect_close(cross_entropy(logits(), t, Tensor(), Reduction::Mean, -100, 0.2), {1.96205676});
  expect_close(cross_entropy(logits(), t, class_weight()), {1.68216562});
  expect_close(cross_entropy(logits(), t, Tensor(), Reduction::Mean, /*ignore_index=*/3), {2.23071885});
}

TEST(CrossEntropyTest, SpatialAndUnbatchedInputs) {
  Tensor x = sin_seq({2, 3, 4}, 0.9, 1.5);
  Tensor t = i64({0, 2, 1, -1, 1, 1, 0, 2}, {2, 4});
  expect_close(cross_entropy(x, t, Tensor(), Reduction::Mean, -1, 0.3), {1.58716083});
  Tensor none = cross_entropy(x, t, Tensor(), Reduction::None, -1);
  EXPECT_EQ(none.sizes(), (IntList{2, 4}));
  expect_close(none, {0.685381114, 3.15776968, 1.71224558, 0, 1.07669497, 0.689959645, 2.20437145, 1.8899734});
  expect_close(cross_entropy(sin_seq({5}, 0.4), scalar_tensor(int64_t{2}, DType::Int64)), {1.51339376});
}

TEST(CrossEntropyTest, LargeLogitsStayFinite) {
  Tensor x = from_vector<float>({1e4f, -1e4f, 0.0f, 3e4f, 3e4f + 1.0f, -3e4f}, {2, 3});
  expect_close(cross_entropy(x, i64({0, 1}), Tensor(), Reduction::None), {0.0, 0.313261688});
  EXPECT_TRUE(std::isfinite(cross_entropy(x, i64({1, 2}), Tensor(), Reduction::Mean, -100, 0.1).item<double>()));
}

TEST(CrossEntropyTest, AllTargetsIgnoredGiveNanMeanLikePyTorch) {
  EXPECT_TRUE(std::isnan(cross_entropy(logits(), i64({-100, -100, -100, -100})).item<double>()));
  EXPECT_EQ(cross_entropy(logits(), i64({-100, -100, -100, -100}), Tensor(), Reduction::Sum).item<double>(), 0.0);
}

TEST(CrossEntropyTest, ErrorsNameTheProblem) {
  EXPECT_EQ(error_of([] { cross_entropy(zeros({2, 10}), i64({1, 12})); }),
            "cross_entropy: target 12 is out of bounds for 10 classes");
  EXPECT_EQ(error_of([] { cross_entropy(zeros({2, 10}), i64({1, -3})); }),
            "cross_entropy: target -3 is out of bounds for 10 classes");
  EXPECT_THAT(error_of([] { cross_entropy(zeros({2, 10, 5}), i64({1, 2})); }),
              HasSubstr("cross_entropy: expected target of shape [2, 5] for input of shape [2, 10, 5], got target shape [2]"));
  EXPECT_THAT(error_of([] { cross_entropy(zeros({2, 3}), zeros({2})); }),
              HasSubstr("cross_entropy: expected target of dtype int64 (class indices), got float32"));
  EXPECT_THAT(error_of([] { cross_entropy(zeros({2, 3}), i64({0, 1}), ones({4})); }),
              HasSubstr("cross_entropy: weight has shape [4], expected [3] (one per class)"));
  EXPECT_THAT(error_of([] { cross_entropy(zeros({2, 3}), i64({0, 1}), Tensor(), Reduction::Mean, -100, 1.5); }),
              HasSubstr("label_smoothing must be between 0.0 and 1.0, got 1.5"));
  EXPECT_THAT(error_of([] { call_op("cross_entropy", {zeros({2, 3}), i64({0, 1}), Value(), 7}); }),
              HasSubstr("cross_entropy: reduction must be 0 (none), 1 (mean) or 2 (sum), got 7"));
}

TEST(NllLossTest, WeightAndIgnoreIndexEveryReductionMatchPyTorch) {
  Tensor lp = log_softmax(logits(), 1);
  Tensor t = i64({1, -100, 0, 3});
  expect_close(nll_loss(lp, t, class_weight(), Reduction::None), {2.08478594, 0, 0.639793038, 1.91051316});
  expect_close(nll_loss(lp, t, class_weight(), Reduction::Mean), {1.54503071});
  expect_close(nll_loss(lp, t, class_weight(), Reduction::Sum), {4.63509226});
  EXPECT_THAT(error_of([&] { nll_loss(lp, i64({0, 1, 2, 5})); }), HasSubstr("nll_loss: target 5 is out of bounds for 5 classes"));
}

TEST(ClassLossBackwardTest, CrossEntropyBackwardMatchesFiniteDifferences) {
  // The op-level check (autograd's gradcheck covers the recorded path in nn_ops_grad_test).
  Tensor x = sin_seq({3, 4, 2}, 0.3, 2.0, DType::Float64);
  Tensor t = i64({0, 3, -100, 1, 2, 2}, {3, 2});
  Tensor w = from_vector<double>({0.5, 1.0, 2.0, 1.5});
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    Tensor g = cross_entropy_backward(scalar_tensor(1.0, DType::Float64), x, t, w, r, -100, 0.25);
    std::vector<double> xv = to_vector<double>(x);
    const std::vector<double> gv = to_vector<double>(g);
    for (size_t i = 0; i < xv.size(); ++i) {
      const double h = 1e-6;
      std::vector<double> p = xv, m = xv;
      p[i] += h;
      m[i] -= h;
      const double fp = cross_entropy(from_vector<double>(p, {3, 4, 2}), t, w, r, -100, 0.25).item<double>();
      const double fm = cross_entropy(from_vector<double>(m, {3, 4, 2}), t, w, r, -100, 0.25).item<double>();
      EXPECT_NEAR(gv[i], (fp - fm) / (2 * h), 1e-7) << "element " << i;
    }
  }
}

TEST(MseL1LossTest, EveryReductionMatchesPyTorch) {
  Tensor p = sin_seq({3, 4}, 0.0), q = sin_seq({3, 4}, 1.3, 0.5);
  expect_close(mse_loss(p, q, Reduction::None), {0.232111096, 0.0184759442, 0.0521316566, 0.315474212, 0.670758843,
                                                 0.93214941, 0.962922096, 0.746980906, 0.397276789, 0.0967267975,
                                                 0.0025375369, 0.163975984});
  expect_close(l1_loss(p, q, Reduction::None), {0.481779099, 0.135926247, 0.228323579, 0.561670899, 0.818998694, 0.965478837,
                                                0.98128593, 0.864280581, 0.630298972, 0.311009318, 0.0503739715, 0.404939473});
  expect_close(mse_loss(p, q), {0.382626772});
  expect_close(l1_loss(p, q), {0.536197126});
  expect_close(mse_loss(p, q, Reduction::Sum), {4.59152126});
  expect_close(l1_loss(p, q, Reduction::Sum), {6.43436575});
}

TEST(MseL1LossTest, LargeInputReducesExactlyEnough) {
  Tensor p = full({1 << 20}, 1.0), q = zeros({1 << 20});
  EXPECT_EQ(mse_loss(p, q).item<double>(), 1.0);
  EXPECT_EQ(l1_loss(p, q, Reduction::Sum).item<double>(), static_cast<double>(1 << 20));
}

TEST(MseL1LossTest, BackwardOps) {
  Tensor p = from_vector<double>({1, 2, 3, 4}), q = from_vector<double>({0, 2, 5, 3});
  EXPECT_EQ(to_vector<double>(mse_loss_backward(scalar_tensor(1.0, DType::Float64), p, q, Reduction::Mean)),
            (std::vector<double>{0.5, 0, -1, 0.5}));
  EXPECT_EQ(to_vector<double>(l1_loss_backward(scalar_tensor(2.0, DType::Float64), p, q, Reduction::Sum)),
            (std::vector<double>{2, 0, -2, 2}));
  EXPECT_EQ(to_vector<double>(l1_loss_backward(from_vector<double>({1, 2, 3, 4}), p, q, Reduction::None)),
            (std::vector<double>{1, 0, -3, 4}));
}

TEST(MseL1LossTest, ShapeMismatchNamesBothShapes) {
  EXPECT_EQ(error_of([] { mse_loss(zeros({2, 3}), zeros({3})); }), "mse_loss: input shape [2, 3] and target shape [3] differ");
  EXPECT_EQ(error_of([] { l1_loss(zeros({2}), zeros({2, 1})); }), "l1_loss: input shape [2] and target shape [2, 1] differ");
}

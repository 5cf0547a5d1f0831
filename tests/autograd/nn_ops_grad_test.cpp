// gradcheck of the nn ops: batch_norm (training and eval, affine or not, None slots),
// native_batch_norm's statistics outputs, activations, softmax / log_softmax, dropout,
// cross_entropy (label smoothing, weights, ignore_index, every reduction), nll_loss,
// mse_loss and l1_loss.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "qflow/qflow.h"
#include "error_of.h"
#include "test_helpers.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

// sin(0.37 i + seed) * scale + shift in float64 (test_helpers.h), as a leaf that requires grad.
Tensor leaf(const IntList& shape, double seed, double scale = 1.0, double shift = 0.0) {
  return testing_util::sin_seq(shape, seed, scale, DType::Float64).add(shift).requires_grad_();
}

Tensor i64(std::initializer_list<int64_t> v, const IntList& shape = {}) { return from_vector<int64_t>(v, shape); }

using qflow::testing_util::error_of;

}  // namespace

// ---- batch norm ---------------------------------------------------------------------------------

TEST(NnOpsGradTest, BatchNormTrainingWrtInputWeightBias) {
  for (const IntList& shape : {IntList{4, 3}, IntList{2, 3, 2, 2}, IntList{3, 2, 4}}) {
    Tensor x = leaf(shape, 0.1, 2.0), w = leaf({shape[1]}, 1.0, 1.0, 0.5), b = leaf({shape[1]}, 2.0);
    Tensor rm = zeros({shape[1]}, DType::Float64), rv = ones({shape[1]}, DType::Float64);
    EXPECT_TRUE(gradcheck([&](const TensorList& in) { return batch_norm(in[0], in[1], in[2], rm, rv, true, 0.1, 1e-5); },
                          {x, w, b}));
  }
}

TEST(NnOpsGradTest, BatchNormEvalWrtInputWeightBias) {
  Tensor x = leaf({2, 3, 2, 2}, 0.4, 2.0), w = leaf({3}, 1.0, 1.0, 0.5), b = leaf({3}, 2.0);
  Tensor rm = from_vector<double>({0.1, -0.2, 0.3}), rv = from_vector<double>({1.5, 0.5, 2.0});
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return batch_norm(in[0], in[1], in[2], rm, rv, false, 0.1, 1e-5); },
                        {x, w, b}));
}

TEST(NnOpsGradTest, BatchNormWithOnlyBiasKeepsFlatNumbering) {
  // weight is None but bias is given: the None slot must not shift bias into weight's place.
  Tensor x = leaf({4, 3}, 0.2, 2.0), b = leaf({3}, 2.0);
  EXPECT_TRUE(gradcheck(
      [&](const TensorList& in) { return batch_norm(in[0], Tensor(), in[1], Tensor(), Tensor(), true, 0.1, 1e-5); }, {x, b}));
  EXPECT_TRUE(gradcheck(
      [&](const TensorList& in) {
        return call_op("batch_norm", {in[0], Value(), in[1], Value(), Value(), true, 0.1, 1e-5}).at(0).tensor();
      },
      {x, b}));
}

TEST(NnOpsGradTest, NativeBatchNormStatisticsAreDifferentiable) {
  Tensor x = leaf({3, 2, 5}, 0.3, 2.0), w = leaf({2}, 1.0, 1.0, 0.5);
  auto stat = [&](int k) {
    return [&, k](const TensorList& in) {
      auto out = native_batch_norm(in[0], in[1], Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      return k == 0 ? std::get<0>(out) : (k == 1 ? std::get<1>(out) : std::get<2>(out));
    };
  };
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(gradcheck(stat(k), {x, w})) << "output " << k;
}

TEST(NnOpsGradTest, BatchNormBackwardSurvivesALaterRunningStatUpdate) {
  // Training backward does not read the running stats, so updating them again (a second
  // forward through the same BN) must not trip the in-place check.
  Tensor x = leaf({4, 3}, 0.2, 2.0);
  Tensor rm = zeros({3}, DType::Float64), rv = ones({3}, DType::Float64);
  Tensor y = batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
  batch_norm(x.detach(), Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
  EXPECT_EQ(y.grad_fn_name(), "NativeBatchNormBackward");
  y.backward(ones({4, 3}, DType::Float64));
  for (double g : to_vector<double>(x.grad())) EXPECT_NEAR(g, 0.0, 1e-12);  // d sum(BN(x)) / dx = 0
}

// ---- activations and softmax --------------------------------------------------------------------

TEST(NnOpsGradTest, Activations) {
  // Values chosen away from the kinks (0, 6, +-3, the hardtanh bounds) by more than gradcheck's eps.
  Tensor x = from_vector<double>({-5.2, -3.5, -2.9, -0.7, 0.4, 1.3, 2.2, 2.95, 3.3, 5.9, 6.4, 8.0}).requires_grad_();
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return relu6(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return hardswish(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return hardtanh(in[0], -3.0, 2.5); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return leaky_relu(in[0], 0.2); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return silu(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return hardsigmoid(in[0]); }, {x}));
  EXPECT_EQ(hardsigmoid(x).grad_fn_name(), "HardsigmoidBackward");
  EXPECT_EQ(relu6(x).grad_fn_name(), "HardtanhBackward");
  EXPECT_EQ(silu(x).grad_fn_name(), "SiluBackward");
}

TEST(NnOpsGradTest, SoftmaxAndLogSoftmaxEveryDim) {
  Tensor x = leaf({2, 3, 4}, 0.1, 3.0);
  for (int64_t d : {0, 1, 2, -1}) {
    EXPECT_TRUE(gradcheck([d](const TensorList& in) { return softmax(in[0], d); }, {x})) << "dim " << d;
    EXPECT_TRUE(gradcheck([d](const TensorList& in) { return log_softmax(in[0], d); }, {x})) << "dim " << d;
  }
}

// ---- dropout ------------------------------------------------------------------------------------

TEST(NnOpsGradTest, DropoutWithAFixedSeed) {
  Tensor x = leaf({4, 5}, 0.3);
  auto fn = [](const TensorList& in) {
    manual_seed(11);  // the same mask for every evaluation
    return dropout(in[0], 0.4, true);
  };
  EXPECT_TRUE(gradcheck(fn, {x}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return dropout(in[0], 0.4, false); }, {x}));
}

TEST(NnOpsGradTest, DropoutGradientOfAKeptZeroIsScaled) {
  // A kept element whose input is 0 looks dropped in the output; the mask still knows.
  Tensor x = zeros({64}, DType::Float64).requires_grad_();
  manual_seed(3);
  auto [y, mask] = native_dropout(x, 0.5, true);
  y.backward(ones({64}, DType::Float64));
  const std::vector<bool> m = to_vector<bool>(mask);
  const std::vector<double> g = to_vector<double>(x.grad());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], m[i] ? 2.0 : 0.0);
}

// ---- losses -------------------------------------------------------------------------------------

TEST(NnOpsGradTest, CrossEntropyEveryReductionWithSmoothingWeightsAndIgnore) {
  Tensor x = leaf({4, 5}, 0.2, 2.0);
  Tensor t = i64({1, -100, 0, 3});
  Tensor w = from_vector<double>({0.5, 1.0, 2.0, 1.5, 0.25});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    for (double eps : {0.0, 0.1}) {
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return cross_entropy(in[0], t, w, r, -100, eps); }, {x}));
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return cross_entropy(in[0], t, Tensor(), r, -100, eps); }, {x}));
    }
  }
}

TEST(NnOpsGradTest, CrossEntropySpatialAndUnbatched) {
  Tensor x = leaf({2, 3, 4}, 0.9, 1.5);
  Tensor t = i64({0, 2, 1, -1, 1, 1, 0, 2}, {2, 4});
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return cross_entropy(in[0], t, Tensor(), Reduction::Mean, -1, 0.3); }, {x}));
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return cross_entropy(in[0], t, Tensor(), Reduction::None, -1, 0.3); }, {x}));
  Tensor u = leaf({5}, 0.4);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return cross_entropy(in[0], scalar_tensor(int64_t{2}, DType::Int64)); }, {u}));
}

TEST(NnOpsGradTest, NllLoss) {
  Tensor x = leaf({4, 5}, 0.2, 2.0);
  Tensor t = i64({1, -100, 0, 3});
  Tensor w = from_vector<double>({0.5, 1.0, 2.0, 1.5, 0.25});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum})
    EXPECT_TRUE(gradcheck([&](const TensorList& in) { return nll_loss(log_softmax(in[0], 1), t, w, r); }, {x}));
}

TEST(NnOpsGradTest, ClassWeightThatRequiresGradIsRefused) {
  Tensor x = leaf({2, 3}, 0.2);
  Tensor w = leaf({3}, 1.0, 0.1, 1.0);
  Tensor loss = cross_entropy(x, i64({0, 2}), w);
  EXPECT_THAT(error_of([&] { loss.backward(); }), HasSubstr("cross_entropy: the derivative for 'weight' is not implemented"));
}

TEST(NnOpsGradTest, MseAndL1WrtInputAndTarget) {
  Tensor p = leaf({3, 4}, 0.0), q = leaf({3, 4}, 1.3, 0.5);  // no ties, so l1 is smooth here
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    EXPECT_TRUE(gradcheck([r](const TensorList& in) { return mse_loss(in[0], in[1], r); }, {p, q}));
    EXPECT_TRUE(gradcheck([r](const TensorList& in) { return l1_loss(in[0], in[1], r); }, {p, q}));
  }
}

TEST(NnOpsGradTest, TrainingStepThroughBatchNormReluAndCrossEntropy) {
  // The composition a classifier runs: grads reach every parameter and the logits.
  Tensor x = leaf({6, 4}, 0.5, 2.0), w = leaf({4}, 1.0, 0.5, 1.0), b = leaf({4}, 2.0, 0.1);
  Tensor t = i64({0, 3, 1, 2, 3, 0});
  EXPECT_TRUE(gradcheck(
      [&](const TensorList& in) {
        Tensor h = hardswish(batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true, 0.1, 1e-5));
        return cross_entropy(h, t, Tensor(), Reduction::Mean, -100, 0.1);
      },
      {x, w, b}));
}

// ---- fused activations (core/kernels/nn/norm.cpp, add_relu.cpp) ----------------------------------
// The inputs keep every pre-activation away from 0, where relu's derivative jumps.

TEST(NnOpsGradTest, BatchNormReluTrainingAndEvalWrtInputWeightBias) {
  Tensor x = leaf({3, 2, 3, 3}, 0.3, 2.0), w = leaf({2}, 1.0, 0.5, 1.0), b = leaf({2}, 2.0, 0.05);
  Tensor rm = from_vector<double>({0.1, -0.2}), rv = from_vector<double>({1.5, 0.5});
  for (bool training : {true, false}) {
    EXPECT_TRUE(gradcheck(
        [&](const TensorList& in) { return batch_norm_relu(in[0], in[1], in[2], rm, rv, training, 0.1, 1e-5); },
        {x, w, b}))
        << "training " << training;
  }
}

TEST(NnOpsGradTest, AddReluWrtBothInputsWithBroadcast) {
  Tensor a = leaf({2, 3, 4}, 0.5, 1.0), b = leaf({3, 1}, 1.5, 0.3, 0.01);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return add_relu(in[0], in[1]); }, {a, b}));
}

TEST(NnOpsGradTest, Conv2dReluWrtInputWeightBias) {
  Tensor x = leaf({2, 2, 4, 4}, 0.2), w = leaf({3, 2, 3, 3}, 1.1, 0.5), b = leaf({3}, 0.7, 0.2);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return conv2d_relu(in[0], in[1], in[2], {1}, {1}); }, {x, w, b}));
}

TEST(NnOpsGradTest, MulSumToWrtBothInputs) {
  Tensor a = leaf({2, 3, 2, 2}, 0.1), b = leaf({2, 3, 2, 2}, 0.9);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return mul_sum_to(in[0], in[1], {1, 3, 1, 1}); }, {a, b}));
}

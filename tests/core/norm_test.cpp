// batch_norm / native_batch_norm / native_batch_norm_backward: golden values from PyTorch 1.13
// (tests/core/goldens/nn_ops.py), a naive reference on shapes that take the parallel paths,
// and error messages.
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

Tensor f32(std::initializer_list<float> v) { return from_vector<float>(v); }

// Naive per-channel reference of training-mode batch norm (double), x: (N, C, S).
std::vector<double> reference_bn(const Tensor& x, double eps) {
  const int64_t N = x.sizes()[0], C = x.sizes()[1], S = x.numel() / (N * C);
  const std::vector<double> v = to_vector<double>(x);
  std::vector<double> out(v.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) mean += v[(n * C + c) * S + s];
    mean /= static_cast<double>(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) var += std::pow(v[(n * C + c) * S + s] - mean, 2);
    var /= static_cast<double>(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) out[(n * C + c) * S + s] = (v[(n * C + c) * S + s] - mean) / std::sqrt(var + eps);
  }
  return out;
}

}  // namespace

TEST(BatchNormTest, Training2DMatchesPyTorchAndUpdatesRunningStatsWithUnbiasedVariance) {
  Tensor x = sin_seq({4, 3}, 0.5, 2.0);
  Tensor rm = f32({0.5, -1.0, 0.0}), rv = f32({1.0, 2.0, 0.5});
  Tensor y = batch_norm(x, f32({1.5, -0.5, 2.0}), f32({0.1, 0.2, -0.3}), rm, rv, /*training=*/true, 0.1, 1e-5);
  expect_close(y, {0.520533681, -0.187876016, 1.89184511, 1.83512223, -0.296071589, 1.29271924, 0.342969269, 0.31580025,
                   -1.32697022, -2.29862523, 0.968147516, -3.0575943});
  expect_close(rm, {0.512628138, -0.856911898, 0.01771616});
  expect_close(rv, {1.08762085, 2.06700492, 0.776290715});
}

TEST(BatchNormTest, Training4DThenEvalMatchPyTorch) {
  Tensor x = sin_seq({2, 3, 2, 2}, 1.0, 3.0) - 1.0;
  Tensor w = f32({0.7, 1.2, -1.1}), b = f32({0.0, 0.5, 1.0});
  Tensor rm = zeros({3}), rv = ones({3});
  const uint64_t version = rm.version();
  Tensor y = batch_norm(x, w, b, rm, rv, true, /*momentum=*/0.3, /*eps=*/1e-3);
  expect_close(y, {0.554497838, 0.70397383, 0.710248351, 0.572472095, 0.848774016, 0.0339853987, -0.877783358, -1.76312876,
                   1.76024878, 2.06816125, 2.18051887, 2.0821147, -1.16038334, -0.846134484, -0.465287089, -0.0693871826,
                   0.799580216, 1.42394102, 1.76319778, 1.77143359, -0.707594752, -0.325088531, 0.185778022, 0.755861521});
  expect_close(rm, {-0.00486923102, 0.127000332, -0.517697155});
  expect_close(rv, {1.99657941, 1.41489124, 2.23914623});
  EXPECT_GT(rm.version(), version);  // an in-place write, visible to saved-tensor checks

  Tensor ye = batch_norm(x, w, b, rm, rv, false, 0.3, 1e-3);
  expect_close(ye, {0.75741452, 0.963107646, 0.971741974, 0.782148778, 1.22219348, 0.23319079, -0.873527825, -1.9481734,
                    2.96412301, 3.40005732, 3.55913019, 3.4198122, -1.60242462, -1.16998827, -0.64590621, -0.101110421,
                    1.16248131, 1.92033982, 2.33213472, 2.34213161, -0.529782534, 0.0117593314, 0.735030293, 1.54213893});
  expect_close(rm, {-0.00486923102, 0.127000332, -0.517697155});  // eval leaves the running stats alone
}

TEST(BatchNormTest, Training3DWithoutAffineOrRunningStats) {
  Tensor y = batch_norm(sin_seq({3, 2, 4}, 2.0), Tensor(), Tensor(), Tensor(), Tensor(), true);
  expect_close(y, {1.05355716, 0.736274719, 0.277765006, -0.259914964, -0.215918243, -0.710849702, -1.06900239, -1.24190187,
                   -1.75801945, -1.52720821, -1.13127255, -0.623800457, 0.542319179, 1.08069503, 1.51337254, 1.78179085,
                   1.18603146, 1.04928172, 0.728940606, 0.268364817, 0.33822459, -0.22589092, -0.718864501, -1.07397437});
}

TEST(BatchNormTest, NativeBatchNormReturnsBatchMeanAndInvstd) {
  Tensor x = sin_seq({2, 3, 2, 2}, 1.0, 3.0) - 1.0;
  auto [y, mean, invstd] = native_batch_norm(x, f32({0.7, 1.2, -1.1}), f32({0.0, 0.5, 1.0}), Tensor(), Tensor(), true, 0.1, 1e-3);
  expect_close(mean, {-0.0162307695, 0.42333442, -1.72565711});
  expect_close(invstd, {0.514161587, 0.692360878, 0.471919924});
  expect_close(y, to_vector<double>(batch_norm(x, f32({0.7, 1.2, -1.1}), f32({0.0, 0.5, 1.0}), Tensor(), Tensor(), true, 0.1, 1e-3)), 0, 0);
}

TEST(BatchNormTest, LargeInputsMatchNaiveReferenceOnEveryPath) {
  // (N, C, H, W) with big planes (parallel over channels), (N, C) with many rows and columns
  // (the channel-vectorized path), and float64.
  for (const IntList& shape : {IntList{8, 16, 32, 32}, IntList{4096, 40}, IntList{3, 5, 7}}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = sin_seq(shape, 0.3, 4.0, dt) + 10.0;  // an offset mean: the two-pass variance must hold
      Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      expect_close(y, reference_bn(x, 1e-5), dt == DType::Float32 ? 2e-5 : 1e-10, dt == DType::Float32 ? 2e-5 : 1e-10);
    }
  }
}

TEST(BatchNormTest, BackwardRecomputingStatsEqualsBackwardWithSavedStats) {
  Tensor x = sin_seq({4, 3, 5}, 0.2, 2.0, DType::Float64);
  Tensor w = from_vector<double>({1.5, -0.5, 2.0}), gy = sin_seq({4, 3, 5}, 1.7, 1.0, DType::Float64);
  auto [y, mean, invstd] = native_batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto [gx1, gw1, gb1] = native_batch_norm_backward(gy, x, w, Tensor(), Tensor(), mean, invstd, true, 1e-5);
  auto [gx2, gw2, gb2] = native_batch_norm_backward(gy, x, w, Tensor(), Tensor(), Tensor(), Tensor(), true, 1e-5);
  expect_close(gx2, to_vector<double>(gx1), 1e-12, 1e-12);
  expect_close(gw2, to_vector<double>(gw1), 1e-12, 1e-12);
  expect_close(gb2, to_vector<double>(gb1), 1e-12, 1e-12);
  // The input gradient of a training BN is orthogonal to the constants and to x itself.
  EXPECT_NEAR(sum(gx1).item<double>(), 0.0, 1e-12);
}

TEST(BatchNormTest, ErrorsNameTheProblem) {
  EXPECT_EQ(error_of([] { batch_norm(ones({1, 4}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
            "batch_norm: expected more than 1 value per channel when training, got input size [1, 4]");
  EXPECT_THAT(error_of([] { batch_norm(ones({2, 4, 3}), ones({3}), Tensor(), Tensor(), Tensor(), true); }),
              HasSubstr("batch_norm: weight has shape [3], expected [4] (the channels of input [2, 4, 3])"));
  EXPECT_THAT(error_of([] { batch_norm(ones({2, 4}), Tensor(), Tensor(), Tensor(), Tensor(), false); }),
              HasSubstr("batch_norm: running_mean and running_var are required when training=False"));
  EXPECT_THAT(error_of([] { batch_norm(ones({2, 4}), Tensor(), Tensor(), zeros({4}), Tensor(), true); }),
              HasSubstr("running_mean and running_var must be given together"));
  EXPECT_THAT(error_of([] { batch_norm(ones({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
              HasSubstr("batch_norm: expected an input with at least 2 dims (N, C, ...), got shape [4]"));
  EXPECT_THAT(error_of([] { batch_norm(ones({2, 4}), Tensor(), Tensor(), zeros({4}, DType::Float64), ones({4}, DType::Float64), false); }),
              HasSubstr("running_mean has dtype float64, expected the input's dtype float32"));
}

TEST(BatchNormTest, CallableByNameWithNoneOptionals) {
  Tensor x = sin_seq({3, 2, 4}, 2.0);
  Stack out = call_op("batch_norm", {x, Value(), Value(), Value(), Value(), true});
  expect_close(out.at(0).tensor(), to_vector<double>(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true)), 0, 0);
}

// Negative control of onnx_test::relative_error (tests/onnx/onnx_test_util.h), on which every
// agreement with ONNX Runtime stands: NaN or Inf in qflow's or Runtime's output is an infinite
// error, never 0.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>

#include "onnx/onnx_test_util.h"

using namespace qflow;

TEST(OnnxTestUtilTest, RelativeErrorIsInfiniteOnNaNOrInf) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  constexpr double kInfinite = std::numeric_limits<double>::infinity();
  const Tensor want = from_vector<float>({1, 2, 4}, {3});
  EXPECT_EQ(onnx_test::relative_error(want, want), 0.0);
  EXPECT_DOUBLE_EQ(onnx_test::relative_error(from_vector<float>({1, 2, 5}, {3}), want), 0.25);
  EXPECT_EQ(onnx_test::relative_error(from_vector<float>({kNaN, kNaN, kNaN}, {3}), want), kInfinite);
  EXPECT_EQ(onnx_test::relative_error(from_vector<float>({1, kInf, 4}, {3}), want), kInfinite);
  EXPECT_EQ(onnx_test::relative_error(want, from_vector<float>({1, kNaN, 4}, {3})), kInfinite);
  EXPECT_EQ(onnx_test::relative_error(Tensor(), want), kInfinite);  // Runtime failed: no output
  EXPECT_NONFATAL_FAILURE(EXPECT_LT(onnx_test::relative_error(from_vector<float>({1, kNaN, 4}, {3}),
                                                              from_vector<float>({1, 2, 4}, {3})),
                                    1e-2),
                          "relative_error");
}

// mm, bmm, matmul, addmm: hand-computed cases, PyTorch 1.13 goldens (inputs built from
// arange so both sides see the same numbers), transposed/strided views, batch broadcasting
// and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "qflow/qflow.h"
#include "error_of.h"
#include "test_helpers.h"

using namespace qflow;
using ::testing::HasSubstr;
using qflow::testing_util::expect_close_abs_below_one;
using qflow::testing_util::ramp;

namespace {

using ::qflow::testing_util::error_of;  // tests/error_of.h

const std::vector<double> kMm = {1.25, 2.5, 3.75, 5.0, 6.25, -5.75, -6.5, -7.25, -8.0, -8.75, -12.75, -15.5, -18.25, -21.0, -23.75};

}  // namespace

TEST(LinalgTest, MmMatchesHandComputed) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(to_vector<float>(mm(a, b)), (std::vector<float>{58, 64, 139, 154}));
}

TEST(LinalgTest, MmMatchesPyTorch) {
  expect_close_abs_below_one(mm(ramp({3, 4}, 0.25, -1.0), ramp({4, 5}, -0.5, 2.0)), {3, 5}, kMm);
}

TEST(LinalgTest, MmOfTransposedViewsMatchesPyTorch) {
  Tensor a = ramp({4, 3}, 0.25, -1.0).t();
  Tensor b = ramp({5, 4}, -0.5, 2.0).t();
  expect_close_abs_below_one(a.mm(b), {3, 5}, {-1.25, -2.25, -3.25, -4.25, -5.25, 0.0, -3.0, -6.0, -9.0, -12.0, 1.25, -3.75, -8.75, -13.75, -18.75});
  // Mixed layouts give the same product as contiguous copies.
  Tensor c = ramp({3, 4}, 0.25, -1.0);
  expect_close_abs_below_one(mm(c, b), {3, 5}, to_vector<double>(mm(c, b.contiguous())));
  expect_close_abs_below_one(mm(a, ramp({4, 5}, -0.5, 2.0)), {3, 5}, to_vector<double>(mm(a.contiguous(), ramp({4, 5}, -0.5, 2.0))));
}

TEST(LinalgTest, MmReadsColumnSliceWithLeadingDimension) {
  Tensor a = ramp({3, 6}, 0.5, -2.0).narrow(1, 1, 4);  // strides (6, 1): ld 6 > 4 columns
  expect_close_abs_below_one(mm(a, ramp({4, 5}, -0.5, 2.0)), {3, 5},
               {-1.0, 0.5, 2.0, 3.5, 5.0, -22.0, -26.5, -31.0, -35.5, -40.0, -43.0, -53.5, -64.0, -74.5, -85.0});
}

TEST(LinalgTest, MmCopiesOperandWithNoBlasLayout) {
  Tensor a = ramp({6, 8}, 0.125, -3.0).slice(0, 0, 6, 2).slice(1, 0, 8, 2);  // strides (16, 2)
  expect_close_abs_below_one(mm(a, ramp({4, 5}, -0.5, 2.0)), {3, 5},
               {15.25, 20.5, 25.75, 31.0, 36.25, 1.25, 2.5, 3.75, 5.0, 6.25, -12.75, -15.5, -18.25, -21.0, -23.75});
}

TEST(LinalgTest, MmFloat64) {
  Tensor r = mm(ramp({2, 3}, 0.1, -0.3, DType::Float64), ramp({3, 2}, 0.7, -1.1, DType::Float64));
  EXPECT_EQ(r.dtype(), DType::Float64);
  expect_close_abs_below_one(r, {2, 2}, {0.10000000000000014, -0.3199999999999998, 0.3699999999999999, 0.58}, 1e-12);
}

TEST(LinalgTest, MmIntegersAreExact) {
  Tensor a = arange(6).reshape({2, 3}) - 2;
  Tensor b = arange(12).reshape({3, 4}) * 3 - 7;
  Tensor r = mm(a, b);
  EXPECT_EQ(r.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(r), (std::vector<int64_t>{9, 0, -9, -18, 54, 72, 90, 108}));
  Tensor bt = (arange(12).reshape({4, 3}) * 3 - 7).t().to(DType::Int32);  // transposed int operand
  EXPECT_EQ(to_vector<int32_t>(mm(a.to(DType::Int32), bt)), (std::vector<int32_t>{18, -9, -36, -63, -18, 36, 90, 144}));
}

TEST(LinalgTest, MatmulOfIntegerBatchesMatchesFloat) {
  Tensor x = arange(24).reshape({2, 3, 4}) - 11;
  Tensor w = (arange(8).reshape({2, 4}) * 2 - 5).t();  // (4, 2), transposed
  Tensor y = arange(16).reshape({2, 4, 2}) - 3;
  EXPECT_EQ(to_vector<int64_t>(matmul(x, w)), to_vector<int64_t>(matmul(x.to(DType::Float64), w.to(DType::Float64)).to(DType::Int64)));
  EXPECT_EQ(to_vector<int64_t>(bmm(x, y)), to_vector<int64_t>(bmm(x.to(DType::Float64), y.to(DType::Float64)).to(DType::Int64)));
  EXPECT_EQ(to_vector<int64_t>(addmm(arange(2), x.select(0, 1), w, 2, 3)),
            to_vector<int64_t>(addmm(arange(2).to(DType::Float64), x.select(0, 1).to(DType::Float64), w.to(DType::Float64), 2, 3)
                                   .to(DType::Int64)));
}

TEST(LinalgTest, MmWithEmptyInnerDimIsZeros) {
  Tensor r = mm(empty({2, 0}), empty({0, 3}));
  EXPECT_EQ(r.sizes(), (IntList{2, 3}));
  EXPECT_EQ(to_vector<float>(r), std::vector<float>(6, 0.0f));
  EXPECT_EQ(mm(empty({0, 4}), empty({4, 3})).sizes(), (IntList{0, 3}));
}

TEST(LinalgTest, MatmulVectorCases) {
  Tensor v = ramp({4}, 0.5, -1.0);
  Tensor u = ramp({4}, -0.25, 2.0);
  Tensor dot = matmul(v, u);
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_NEAR(dot.item<double>(), -2.25, 1e-6);
  expect_close_abs_below_one(matmul(ramp({3, 4}, 0.25, -1.0), v), {3}, {1.25, 0.25, -0.75});
  expect_close_abs_below_one(matmul(ramp({4, 3}, 0.25, -1.0).t(), v), {3}, {1.75, 1.5, 1.25});
  expect_close_abs_below_one(v.matmul(ramp({4, 5}, -0.5, 2.0)), {5}, {-4.5, -4.0, -3.5, -3.0, -2.5});
  expect_close_abs_below_one(matmul(v, ramp({2, 4, 5}, 0.05, -0.5)), {2, 5},
               {0.75, 0.7, 0.65, 0.6, 0.55, -0.25, -0.3, -0.35, -0.4, -0.45});
  expect_close_abs_below_one(matmul(ramp({2, 3, 4}, 0.1, -1.0), v), {2, 3}, {1.1, 0.7, 0.3, -0.1, -0.5, -0.9});
}

TEST(LinalgTest, MatmulOfStridedVectorMatchesContiguous) {
  Tensor m = ramp({4, 3}, 0.25, -1.0);
  Tensor col = m.select(1, 1);  // stride 3
  Tensor dense = col.contiguous();
  expect_close_abs_below_one(matmul(ramp({2, 4}, 0.5, 1.0), col), {2}, to_vector<double>(matmul(ramp({2, 4}, 0.5, 1.0), dense)));
  EXPECT_NEAR(matmul(col, col).item<double>(), matmul(dense, dense).item<double>(), 1e-6);
}

TEST(LinalgTest, MatmulBroadcastsBatchDims) {
  expect_close_abs_below_one(matmul(ramp({2, 1, 3, 4}, 0.1, -1.0), ramp({3, 4, 2}, -0.2, 1.5)), {2, 3, 3, 2},
               {-3.26, -2.58, -1.82, -1.46, -0.38, -0.34, 2.18, 2.86, 1.06, 1.42, -0.06, -0.02,
                7.62, 8.30, 3.94, 4.30, 0.26, 0.30, 1.06, 0.78, 2.5, 1.9, 3.94, 3.02,
                -1.18, -1.46, -2.30, -2.90, -3.42, -4.34, -3.42, -3.70, -7.10, -7.70, -10.78, -11.70},
               1e-4);
}

TEST(LinalgTest, MatmulBatchTimesSharedMatrix) {
  Tensor x = ramp({2, 3, 4}, 0.1, -1.0);
  expect_close_abs_below_one(matmul(x, ramp({4, 5}, -0.2, 1.5)), {2, 3, 5},
               {-0.5, 0.18, 0.86, 1.54, 2.22, -0.5, -0.14, 0.22, 0.58, 0.94, -0.5, -0.46, -0.42, -0.38, -0.34,
                -0.5, -0.78, -1.06, -1.34, -1.62, -0.5, -1.1, -1.7, -2.3, -2.9, -0.5, -1.42, -2.34, -3.26, -4.18},
               1e-4);
  expect_close_abs_below_one(matmul(x, ramp({5, 4}, -0.2, 1.5).t()), {2, 3, 5},
               {-4.18, -1.46, 1.26, 3.98, 6.7, -2.26, -0.82, 0.62, 2.06, 3.5, -0.34, -0.18, -0.02, 0.14, 0.3,
                1.58, 0.46, -0.66, -1.78, -2.9, 3.5, 1.1, -1.3, -3.7, -6.1, 5.42, 1.74, -1.94, -5.62, -9.3},
               1e-4);
  // A batch that cannot be folded into rows (transposed batch) gives the same numbers.
  Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1);
  expect_close_abs_below_one(matmul(xt, ramp({4, 5}, -0.2, 1.5)), {2, 3, 5}, to_vector<double>(matmul(x, ramp({4, 5}, -0.2, 1.5))));
}

TEST(LinalgTest, MatmulMatrixTimesBatch) {
  expect_close_abs_below_one(matmul(ramp({3, 4}, 0.3, -1.0), ramp({2, 4, 5}, 0.05, -0.5)), {2, 3, 5},
               {0.65, 0.54, 0.43, 0.32, 0.21, 0.05, 0.18, 0.31, 0.44, 0.57, -0.55, -0.18, 0.19, 0.56, 0.93,
                -1.55, -1.66, -1.77, -1.88, -1.99, 2.65, 2.78, 2.91, 3.04, 3.17, 6.85, 7.22, 7.59, 7.96, 8.33},
               1e-4);
}

TEST(LinalgTest, MatmulIsReachableByName) {
  Stack r = call_op("matmul", {ramp({3, 4}, 0.25, -1.0), ramp({4, 5}, -0.5, 2.0)});
  expect_close_abs_below_one(r.at(0).tensor(), {3, 5}, kMm);
}

TEST(LinalgTest, BmmMatchesPyTorch) {
  Tensor b2 = ramp({2, 4, 2}, 0.3, -0.7);
  expect_close_abs_below_one(bmm(ramp({2, 3, 4}, 0.1, -1.0), b2), {2, 3, 2},
               {-0.38, -1.4, -0.06, -0.6, 0.26, 0.2, 3.94, 4.36, 8.1, 9.0, 12.26, 13.64}, 1e-4);
  expect_close_abs_below_one(ramp({2, 4, 3}, 0.1, -1.0).transpose(1, 2).bmm(b2), {2, 3, 2},
               {0.46, -0.2, 0.54, 0.0, 0.62, 0.2, 7.66, 8.44, 8.7, 9.6, 9.74, 10.76}, 1e-4);
}

TEST(LinalgTest, BmmOfManySmallMatricesMatchesPerMatrixMm) {
  // 256 small products (16x16x16) are spread over threads, one single-threaded GEMM each.
  Tensor a = randn({256, 16, 16});
  Tensor b = randn({256, 16, 16}).transpose(1, 2);
  Tensor r = bmm(a, b);
  for (int64_t i : {0, 1, 127, 255})
    expect_close_abs_below_one(r.select(0, i), {16, 16}, to_vector<double>(mm(a.select(0, i), b.select(0, i))), 1e-4);
}

TEST(LinalgTest, AddmmScalesAndBroadcastsBias) {
  Tensor bias = from_vector<float>({1.0, -2.0, 0.5, 3.0, -1.5});
  expect_close_abs_below_one(addmm(bias, ramp({3, 4}, 0.25, -1.0), ramp({4, 5}, -0.5, 2.0), 0.5, 2.0), {3, 5},
               {3.0, 4.0, 7.75, 11.5, 11.75, -11.0, -14.0, -14.25, -14.5, -18.25, -25.0, -32.0, -36.25, -40.5, -48.25});
}

TEST(LinalgTest, AddmmWithZeroBetaIgnoresSelf) {
  Tensor self = full({3, 5}, std::numeric_limits<float>::quiet_NaN());
  expect_close_abs_below_one(addmm(self, ramp({3, 4}, 0.25, -1.0), ramp({4, 5}, -0.5, 2.0), 0, 1), {3, 5}, kMm);
}

TEST(LinalgTest, AddmmWithEmptyInnerDimIsScaledSelf) {
  Tensor r = addmm(from_vector<float>({1, 2}, {2, 1}), empty({2, 0}), empty({0, 3}), 3, 1);
  EXPECT_EQ(to_vector<float>(r), (std::vector<float>{3, 3, 3, 6, 6, 6}));
}

TEST(LinalgTest, ErrorsNameOpAndShapes) {
  EXPECT_THAT(error_of([] { mm(zeros({2, 3}), zeros({4, 5})); }),
              HasSubstr("mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"));
  EXPECT_THAT(error_of([] { mm(zeros({2, 3, 4}), zeros({4, 5})); }), HasSubstr("mm: expected 2-D matrices"));
  EXPECT_THAT(error_of([] { mm(zeros({2, 3}), zeros({3, 2}, DType::Float64)); }),
              HasSubstr("mm: expected mat1 and mat2 to have the same dtype, got float32 and float64"));
  EXPECT_THAT(error_of([] { mm(zeros({2, 3}, DType::Bool), zeros({3, 2}, DType::Bool)); }),
              HasSubstr("mm: bool tensors are not supported"));
  EXPECT_THAT(error_of([] { bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); }),
              HasSubstr("bmm: batch1 and batch2 must have the same batch size (2x3x4 and 3x4x5)"));
  EXPECT_THAT(error_of([] { bmm(zeros({2, 3, 4}), zeros({2, 5, 6})); }),
              HasSubstr("bmm: batch1 and batch2 shapes cannot be multiplied (2x3x4 and 2x5x6)"));
  EXPECT_THAT(error_of([] { matmul(scalar_tensor(1.0f), zeros({2, 3})); }),
              HasSubstr("matmul: both arguments need to be at least 1-D, got shapes [] and 2x3"));
  EXPECT_THAT(error_of([] { matmul(zeros({2, 3, 4}), zeros({3, 4, 2})); }),
              HasSubstr("matmul: batch dimensions cannot be broadcast (2x3x4 and 3x4x2)"));
  EXPECT_THAT(error_of([] { matmul(zeros({3}), zeros({4})); }), HasSubstr("matmul: shapes cannot be multiplied (3 and 4)"));
  EXPECT_THAT(error_of([] { matmul(zeros({2, 5, 3}), zeros({4, 2})); }),
              HasSubstr("matmul: shapes cannot be multiplied (2x5x3 and 4x2)"));
  EXPECT_THAT(error_of([] { addmm(zeros({3}), zeros({2, 3}), zeros({3, 4})); }),
              HasSubstr("addmm: self of shape 3 cannot be broadcast to the product's shape 2x4"));
  EXPECT_THAT(error_of([] { addmm(zeros({4}, DType::Int64), zeros({2, 4}, DType::Int64), zeros({4, 4}, DType::Int64), 0.5, 1); }),
              HasSubstr("addmm: for integer tensors, beta and alpha must be integers, got 0.5 and 1"));
  EXPECT_THAT(error_of([] { addmm(zeros({4}), zeros({2, 3}), zeros({4, 4})); }),
              HasSubstr("addmm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x4)"));
}

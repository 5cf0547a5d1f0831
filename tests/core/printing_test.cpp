// Printing follows PyTorch 1.13's repr rule for rule. Every golden below is
// `repr(t)` from PyTorch 1.13 for the same tensor, with qflow's two naming differences applied
// to the suffixes before PyTorch laid them out: `dtype=float64` instead of
// `dtype=torch.float64`, and node names without the trailing 0 (`MulBackward`).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

// torch.tensor([(i % 97) * 0.25 - 3.0 for i in range(n)])
Tensor cyclic_quarters(int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>((i % 97) * 0.25 - 3.0));
  return from_vector(v);
}

// (torch.arange(n) % 100 - 50).to(torch.int8)
Tensor cyclic_int8(int64_t n) {
  std::vector<int8_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int8_t>(i % 100 - 50));
  return from_vector(v);
}

}  // namespace

TEST(PrintingTest, UndefinedTensor) { EXPECT_EQ(to_string(Tensor()), "tensor(undefined)"); }

TEST(PrintingTest, StreamAndFmtAgreeWithToString) {
  const Tensor t = from_vector<float>({1.5f, 2.25f, -3.125f, 4.0f}, {2, 2});
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), to_string(t));
  EXPECT_EQ(fmt::format("{}", t), to_string(t));
}

TEST(PrintingTest, FloatMatrixMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({1.5f, 2.25f, -3.125f, 4.0f}, {2, 2})),
      "tensor([[ 1.5000,  2.2500],\n"
      "        [-3.1250,  4.0000]])");
}

TEST(PrintingTest, IntegerValuedFloatsMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({1, 2, 3, 40}, {2, 2})),
      "tensor([[ 1.,  2.],\n"
      "        [ 3., 40.]])");
}

TEST(PrintingTest, Int64VectorMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<int64_t>({1, 2, 3})),
      "tensor([1, 2, 3])");
}

TEST(PrintingTest, NegativeIntsMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<int64_t>({-100, 2, 35, 7}, {2, 2})),
      "tensor([[-100,    2],\n"
      "        [  35,    7]])");
}

TEST(PrintingTest, BoolsMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<bool>({true, false})),
      "tensor([ True, False])");
}

TEST(PrintingTest, ZeroDimMatchesPyTorch) {
  EXPECT_EQ(to_string(scalar_tensor(3.5)),
      "tensor(3.5000)");
}

TEST(PrintingTest, ZeroDimIntMatchesPyTorch) {
  EXPECT_EQ(to_string(scalar_tensor(7)),
      "tensor(7)");
}

TEST(PrintingTest, NegativesFixedMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({-1.5f, 0.25f, -0.125f, 2.0f})),
      "tensor([-1.5000,  0.2500, -0.1250,  2.0000])");
}

TEST(PrintingTest, NegativesMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({-1.5f, 0.25f, -0.0001f, 2.0f})),
      "tensor([-1.5000e+00,  2.5000e-01, -1.0000e-04,  2.0000e+00])");
}

TEST(PrintingTest, ScientificMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({1e-5f, 1.0f, 123456.0f})),
      "tensor([1.0000e-05, 1.0000e+00, 1.2346e+05])");
}

TEST(PrintingTest, ScientificLargeIntsMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({1.0f, 1e9f})),
      "tensor([1.0000e+00, 1.0000e+09])");
}

TEST(PrintingTest, Float64MatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<double>({0.1, 0.2})),
      "tensor([0.1000, 0.2000], dtype=float64)");
}

TEST(PrintingTest, Int32MatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<int32_t>({1, -2})),
      "tensor([ 1, -2], dtype=int32)");
}

TEST(PrintingTest, UInt8MatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<uint8_t>({0, 255})),
      "tensor([  0, 255], dtype=uint8)");
}

TEST(PrintingTest, NanInfMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({std::nanf(""), INFINITY, -INFINITY, 1.5f})),
      "tensor([   nan,    inf,   -inf, 1.5000])");
}

TEST(PrintingTest, ZerosMatchesPyTorch) {
  EXPECT_EQ(to_string(zeros({3})),
      "tensor([0., 0., 0.])");
}

TEST(PrintingTest, EmptyMatchesPyTorch) {
  EXPECT_EQ(to_string(zeros({0})),
      "tensor([])");
}

TEST(PrintingTest, Empty2dMatchesPyTorch) {
  EXPECT_EQ(to_string(zeros({2, 0}, DType::Int64)),
      "tensor([], size=(2, 0), dtype=int64)");
}

TEST(PrintingTest, Empty2dBoolMatchesPyTorch) {
  EXPECT_EQ(to_string(zeros({0, 3}, DType::Bool)),
      "tensor([], size=(0, 3), dtype=bool)");
}

TEST(PrintingTest, LongVectorWrapsMatchesPyTorch) {
  EXPECT_EQ(to_string(arange(0, 30, 1, DType::Float32) * 1.5),
      "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
      "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
      "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n"
      "        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])");
}

TEST(PrintingTest, ThreeDimMatchesPyTorch) {
  EXPECT_EQ(to_string(arange(0, 12, 1, DType::Float32).reshape({2, 3, 2}) * 0.5),
      "tensor([[[0.0000, 0.5000],\n"
      "         [1.0000, 1.5000],\n"
      "         [2.0000, 2.5000]],\n"
      "\n"
      "        [[3.0000, 3.5000],\n"
      "         [4.0000, 4.5000],\n"
      "         [5.0000, 5.5000]]])");
}

TEST(PrintingTest, TransposedMatchesPyTorch) {
  EXPECT_EQ(to_string((arange(0, 6, 1, DType::Float32).reshape({2, 3}) * 0.5).t()),
      "tensor([[0.0000, 1.5000],\n"
      "        [0.5000, 2.0000],\n"
      "        [1.0000, 2.5000]])");
}

TEST(PrintingTest, SummarizedMatrixMatchesPyTorch) {
  EXPECT_EQ(to_string(cyclic_quarters(2000).reshape({40, 50})),
      "tensor([[-3.0000, -2.7500, -2.5000,  ...,  8.7500,  9.0000,  9.2500],\n"
      "        [ 9.5000,  9.7500, 10.0000,  ..., -3.0000, -2.7500, -2.5000],\n"
      "        [-2.2500, -2.0000, -1.7500,  ...,  9.5000,  9.7500, 10.0000],\n"
      "        ...,\n"
      "        [-1.2500, -1.0000, -0.7500,  ..., 10.5000, 10.7500, 11.0000],\n"
      "        [11.2500, 11.5000, 11.7500,  ..., -1.2500, -1.0000, -0.7500],\n"
      "        [-0.5000, -0.2500,  0.0000,  ..., 11.2500, 11.5000, 11.7500]])");
}

TEST(PrintingTest, SummarizedVectorMatchesPyTorch) {
  EXPECT_EQ(to_string(arange(1001)),
      "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
}

TEST(PrintingTest, SummarizedThreeDimMatchesPyTorch) {
  EXPECT_EQ(to_string(cyclic_quarters(2000).reshape({10, 20, 10})),
      "tensor([[[-3.0000, -2.7500, -2.5000,  ..., -1.2500, -1.0000, -0.7500],\n"
      "         [-0.5000, -0.2500,  0.0000,  ...,  1.2500,  1.5000,  1.7500],\n"
      "         [ 2.0000,  2.2500,  2.5000,  ...,  3.7500,  4.0000,  4.2500],\n"
      "         ...,\n"
      "         [15.2500, 15.5000, 15.7500,  ..., 17.0000, 17.2500, 17.5000],\n"
      "         [17.7500, 18.0000, 18.2500,  ..., 19.5000, 19.7500, 20.0000],\n"
      "         [20.2500, 20.5000, 20.7500,  ..., -2.2500, -2.0000, -1.7500]],\n"
      "\n"
      "        [[-1.5000, -1.2500, -1.0000,  ...,  0.2500,  0.5000,  0.7500],\n"
      "         [ 1.0000,  1.2500,  1.5000,  ...,  2.7500,  3.0000,  3.2500],\n"
      "         [ 3.5000,  3.7500,  4.0000,  ...,  5.2500,  5.5000,  5.7500],\n"
      "         ...,\n"
      "         [16.7500, 17.0000, 17.2500,  ..., 18.5000, 18.7500, 19.0000],\n"
      "         [19.2500, 19.5000, 19.7500,  ..., 21.0000, -3.0000, -2.7500],\n"
      "         [-2.5000, -2.2500, -2.0000,  ..., -0.7500, -0.5000, -0.2500]],\n"
      "\n"
      "        [[ 0.0000,  0.2500,  0.5000,  ...,  1.7500,  2.0000,  2.2500],\n"
      "         [ 2.5000,  2.7500,  3.0000,  ...,  4.2500,  4.5000,  4.7500],\n"
      "         [ 5.0000,  5.2500,  5.5000,  ...,  6.7500,  7.0000,  7.2500],\n"
      "         ...,\n"
      "         [18.2500, 18.5000, 18.7500,  ..., 20.0000, 20.2500, 20.5000],\n"
      "         [20.7500, 21.0000, -3.0000,  ..., -1.7500, -1.5000, -1.2500],\n"
      "         [-1.0000, -0.7500, -0.5000,  ...,  0.7500,  1.0000,  1.2500]],\n"
      "\n"
      "        ...,\n"
      "\n"
      "        [[ 7.5000,  7.7500,  8.0000,  ...,  9.2500,  9.5000,  9.7500],\n"
      "         [10.0000, 10.2500, 10.5000,  ..., 11.7500, 12.0000, 12.2500],\n"
      "         [12.5000, 12.7500, 13.0000,  ..., 14.2500, 14.5000, 14.7500],\n"
      "         ...,\n"
      "         [ 1.5000,  1.7500,  2.0000,  ...,  3.2500,  3.5000,  3.7500],\n"
      "         [ 4.0000,  4.2500,  4.5000,  ...,  5.7500,  6.0000,  6.2500],\n"
      "         [ 6.5000,  6.7500,  7.0000,  ...,  8.2500,  8.5000,  8.7500]],\n"
      "\n"
      "        [[ 9.0000,  9.2500,  9.5000,  ..., 10.7500, 11.0000, 11.2500],\n"
      "         [11.5000, 11.7500, 12.0000,  ..., 13.2500, 13.5000, 13.7500],\n"
      "         [14.0000, 14.2500, 14.5000,  ..., 15.7500, 16.0000, 16.2500],\n"
      "         ...,\n"
      "         [ 3.0000,  3.2500,  3.5000,  ...,  4.7500,  5.0000,  5.2500],\n"
      "         [ 5.5000,  5.7500,  6.0000,  ...,  7.2500,  7.5000,  7.7500],\n"
      "         [ 8.0000,  8.2500,  8.5000,  ...,  9.7500, 10.0000, 10.2500]],\n"
      "\n"
      "        [[10.5000, 10.7500, 11.0000,  ..., 12.2500, 12.5000, 12.7500],\n"
      "         [13.0000, 13.2500, 13.5000,  ..., 14.7500, 15.0000, 15.2500],\n"
      "         [15.5000, 15.7500, 16.0000,  ..., 17.2500, 17.5000, 17.7500],\n"
      "         ...,\n"
      "         [ 4.5000,  4.7500,  5.0000,  ...,  6.2500,  6.5000,  6.7500],\n"
      "         [ 7.0000,  7.2500,  7.5000,  ...,  8.7500,  9.0000,  9.2500],\n"
      "         [ 9.5000,  9.7500, 10.0000,  ..., 11.2500, 11.5000, 11.7500]]])");
}

TEST(PrintingTest, Int8SummarizedMatchesPyTorch) {
  EXPECT_EQ(to_string(cyclic_int8(1200).reshape({30, 40})),
      "tensor([[-50, -49, -48,  ..., -13, -12, -11],\n"
      "        [-10,  -9,  -8,  ...,  27,  28,  29],\n"
      "        [ 30,  31,  32,  ..., -33, -32, -31],\n"
      "        ...,\n"
      "        [ 30,  31,  32,  ..., -33, -32, -31],\n"
      "        [-30, -29, -28,  ...,   7,   8,   9],\n"
      "        [ 10,  11,  12,  ...,  47,  48,  49]], dtype=int8)");
}

TEST(PrintingTest, RequiresGradMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({1.5f, 2.0f}).requires_grad_()),
      "tensor([1.5000, 2.0000], requires_grad=True)");
}

TEST(PrintingTest, RequiresGradFloat64MatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<double>({1.5, 2.0}).requires_grad_()),
      "tensor([1.5000, 2.0000], dtype=float64, requires_grad=True)");
}

TEST(PrintingTest, SuffixWrapsToNewLineMatchesPyTorch) {
  EXPECT_EQ(to_string((arange(0, 8, 1, DType::Float64) * 1.25).requires_grad_()),
      "tensor([0.0000, 1.2500, 2.5000, 3.7500, 5.0000, 6.2500, 7.5000, 8.7500],\n"
      "       dtype=float64, requires_grad=True)");
}

TEST(PrintingTest, GradFnMatchesPyTorch) {
  EXPECT_EQ(to_string(from_vector<float>({1.5f, 2.0f}).requires_grad_() * from_vector<float>({3.0f, -0.5f})),
      "tensor([ 4.5000, -1.0000], grad_fn=<MulBackward>)");
}


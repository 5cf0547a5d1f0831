// Values of the element-wise ops in core/kernels/{unary,clamp,binary_math,compare}.cpp:
// hand-computed cases, PyTorch 1.13 goldens, dtype promotion, broadcasting and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using qflow::testing_util::error_of;

template <typename T>
void expect_near(const Tensor& t, const std::vector<T>& expected, double rel) {
  const std::vector<T> got = to_vector<T>(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], rel * std::max(1.0, std::abs(static_cast<double>(expected[i])))) << "element " << i;
}

std::vector<bool> bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::Bool);
  return to_vector<bool>(t);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

// ---- unary: sign-like ops keep the dtype -------------------------------------------------------

TEST(UnaryTest, NegAndAbsKeepIntegerDtype) {
  Tensor i = from_vector<int64_t>({-2, 0, 3});
  EXPECT_EQ(neg(i).dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(neg(i)), (std::vector<int64_t>{2, 0, -3}));
  EXPECT_EQ(to_vector<int64_t>(abs(i)), (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(to_vector<float>(-from_vector<float>({1.5f, -2.0f})), (std::vector<float>{-1.5f, 2.0f}));
  EXPECT_EQ(to_vector<float>(from_vector<float>({-1.5f, 2.0f, -0.0f}).abs()), (std::vector<float>{1.5f, 2.0f, 0.0f}));
  // uint8 negation wraps (PyTorch: tensor([255, 254], dtype=torch.uint8)).
  EXPECT_EQ(to_vector<uint8_t>(neg(from_vector<uint8_t>({1, 2}))), (std::vector<uint8_t>{255, 254}));
}

TEST(UnaryTest, NegAbsRoundFloorRefuseBool) {
  Tensor b = from_vector<bool>({true, false});
  EXPECT_THAT(error_of([&] { neg(b); }), HasSubstr("neg: not supported for bool tensors"));
  EXPECT_THAT(error_of([&] { abs(b); }), HasSubstr("abs: not supported for bool tensors"));
  EXPECT_THAT(error_of([&] { round(b); }), HasSubstr("round: not supported for bool tensors"));
  EXPECT_THAT(error_of([&] { floor(b); }), HasSubstr("floor: not supported for bool tensors"));
  EXPECT_EQ(bools(sign(b)), (std::vector<bool>{true, false}));
}

TEST(UnaryTest, SignOfFloatsAndInts) {
  // PyTorch 1.13: sign([-2.5, -0., 0., 3., nan]) = [-1., 0., 0., 1., 0.]
  const std::vector<float> s = to_vector<float>(sign(from_vector<float>({-2.5f, -0.0f, 0.0f, 3.0f, kNaN})));
  EXPECT_EQ(s, (std::vector<float>{-1, 0, 0, 1, 0}));
  EXPECT_FALSE(std::signbit(s[1]));
  EXPECT_EQ(to_vector<int32_t>(sign(from_vector<int32_t>({-5, 0, 7}))), (std::vector<int32_t>{-1, 0, 1}));
}

TEST(UnaryTest, RoundIsHalfToEven) {
  Tensor x = from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 2.6f, -2.6f});
  // PyTorch 1.13: [0., 2., 2., -0., -2., -2., 0., 3., -3.]
  EXPECT_EQ(to_vector<float>(round(x)), (std::vector<float>{0, 2, 2, -0.0f, -2, -2, 0, 3, -3}));
  EXPECT_EQ(to_vector<double>(round(from_vector<double>({0.5, 1.5, 2.5, 3.5, -3.5}))),
            (std::vector<double>{0, 2, 2, 4, -4}));
}

TEST(UnaryTest, FloorAndRoundOfIntegersAreIdentity) {
  EXPECT_EQ(to_vector<float>(floor(from_vector<float>({-0.5f, 1.5f, -2.0f, 2.9f}))), (std::vector<float>{-1, 1, -2, 2}));
  Tensor i = from_vector<int64_t>({-7, 0, 9});
  EXPECT_EQ(floor(i).dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(floor(i)), (std::vector<int64_t>{-7, 0, 9}));
  EXPECT_EQ(to_vector<int64_t>(round(i)), (std::vector<int64_t>{-7, 0, 9}));
}

// ---- unary: transcendental ops -----------------------------------------------------------------

TEST(UnaryTest, ExpSigmoidTanhMatchPyTorch) {
  Tensor x = from_vector<float>({-3.5f, -1.25f, -0.5f, 0.0f, 0.75f, 2.0f, 4.5f});
  expect_near<float>(exp(x), {0.0301973838f, 0.286504805f, 0.606530666f, 1.0f, 2.1170001f, 7.38905621f, 90.017128f}, 2e-7);
  expect_near<float>(sigmoid(x), {0.0293122306f, 0.222700134f, 0.377540678f, 0.5f, 0.679178715f, 0.880797029f, 0.989013076f},
                     2e-7);
  expect_near<float>(tanh(x), {-0.998177886f, -0.848283648f, -0.462117165f, 0.0f, 0.635148942f, 0.964027584f, 0.999753237f},
                     3e-7);
}

TEST(UnaryTest, LogSqrtRsqrtMatchPyTorch) {
  Tensor p = from_vector<float>({0.01f, 0.5f, 1.0f, 2.0f, 9.0f, 123.456f});
  expect_near<float>(log(p), {-4.60517025f, -0.693147182f, 0.0f, 0.693147182f, 2.19722462f, 4.81588459f}, 2e-7);
  expect_near<float>(sqrt(p), {0.100000001f, 0.707106769f, 1.0f, 1.41421354f, 3.0f, 11.1110754f}, 1e-7);
  expect_near<float>(rsqrt(p), {10.0f, 1.41421354f, 1.0f, 0.707106769f, 0.333333343f, 0.0900002867f}, 1e-7);
}

TEST(UnaryTest, Float64MatchesStdMath) {
  Tensor x = from_vector<double>({-2.0, -0.3, 0.7, 3.1});
  EXPECT_EQ(exp(x).dtype(), DType::Float64);
  const std::vector<double> v = {-2.0, -0.3, 0.7, 3.1};
  std::vector<double> e, t, s;
  for (double a : v) {
    e.push_back(std::exp(a));
    t.push_back(std::tanh(a));
    s.push_back(1.0 / (1.0 + std::exp(-a)));
  }
  expect_near<double>(exp(x), e, 1e-15);
  expect_near<double>(tanh(x), t, 1e-15);
  expect_near<double>(sigmoid(x), s, 1e-15);
  expect_near<double>(sqrt(abs(x)), {std::sqrt(2.0), std::sqrt(0.3), std::sqrt(0.7), std::sqrt(3.1)}, 1e-16);
}

TEST(UnaryTest, IntegerAndBoolInputsPromoteToFloat32) {
  Tensor i = from_vector<int64_t>({-2, 0, 3});
  Tensor e = exp(i);
  EXPECT_EQ(e.dtype(), DType::Float32);
  expect_near<float>(e, {0.135335281f, 1.0f, 20.0855369f}, 2e-7);
  // PyTorch: sqrt(tensor([-2, 0, 3])) = [nan, 0., 1.7321]
  const std::vector<float> r = to_vector<float>(sqrt(i));
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_NEAR(r[2], 1.7320508f, 1e-7);
  Tensor b = sigmoid(from_vector<bool>({true, false}));
  EXPECT_EQ(b.dtype(), DType::Float32);
  expect_near<float>(b, {0.731058598f, 0.5f}, 2e-7);
}

TEST(UnaryTest, SpecialValues) {
  const std::vector<float> e = to_vector<float>(exp(from_vector<float>({kNaN, -kInf, kInf, 100.0f, -104.0f})));
  EXPECT_TRUE(std::isnan(e[0]));
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_EQ(e[2], kInf);
  EXPECT_EQ(e[3], kInf);  // overflows like PyTorch, no clamping to FLT_MAX
  EXPECT_EQ(e[4], 0.0f);
  const std::vector<float> l = to_vector<float>(log(from_vector<float>({0.0f, -1.0f, kInf})));
  EXPECT_EQ(l[0], -kInf);
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_EQ(l[2], kInf);
  EXPECT_EQ(to_vector<float>(rsqrt(from_vector<float>({0.0f, kInf}))), (std::vector<float>{kInf, 0.0f}));
  EXPECT_EQ(to_vector<float>(tanh(from_vector<float>({-50.0f, 50.0f}))), (std::vector<float>{-1.0f, 1.0f}));
}

TEST(UnaryTest, SigmoidIsStableInTheTails) {
  // Computed as e/(1+e) with e = exp(-|x|) for x < 0, so no exp overflow and the tail keeps
  // its relative precision (PyTorch float64: sigmoid(-100) = 3.7200759760208356e-44).
  const std::vector<double> d = to_vector<double>(sigmoid(from_vector<double>({-100.0, 100.0, -800.0, 800.0})));
  EXPECT_NEAR(d[0], 3.7200759760208356e-44, 1e-58);
  EXPECT_EQ(d[1], 1.0);
  EXPECT_EQ(d[2], 0.0);
  EXPECT_EQ(d[3], 1.0);
  const std::vector<float> f = to_vector<float>(sigmoid(from_vector<float>({-20.0f, 20.0f, -200.0f, kNaN})));
  EXPECT_NEAR(f[0], 2.06115369e-09f, 1e-16f);  // PyTorch: 2.06115369216775e-09
  EXPECT_EQ(f[1], 1.0f);
  EXPECT_EQ(f[2], 0.0f);
  EXPECT_TRUE(std::isnan(f[3]));
}

TEST(UnaryTest, NonContiguousAndLargeInputs) {
  // A transposed view: the kernel must read through strides.
  Tensor x = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).t();
  expect_near<float>(exp(x), {1.0f, 20.0855369f, 2.71828183f, 54.5981500f, 7.3890561f, 148.413159f}, 2e-7);
  expect_near<float>(neg(x), {0, -3, -1, -4, -2, -5}, 0);
  // Above the parallel grain: every chunk must be computed.
  const int64_t n = 100003;
  Tensor big = arange(Scalar(0), Scalar(n), Scalar(1), DType::Float32).div(Scalar(n));
  const std::vector<float> y = to_vector<float>(sqrt(big));
  for (int64_t i = 0; i < n; i += 9973) EXPECT_NEAR(y[i], std::sqrt(static_cast<float>(i) / n), 1e-7) << i;
  EXPECT_NEAR(y[n - 1], std::sqrt(static_cast<float>(n - 1) / n), 1e-7);
}

// ---- relu / clamp ------------------------------------------------------------------------------

TEST(ClampTest, ReluValuesAndDtypes) {
  const std::vector<float> r = to_vector<float>(relu(from_vector<float>({-1.5f, 0.0f, 2.0f, kNaN, -kInf})));
  EXPECT_EQ(r[0], 0.0f);
  EXPECT_EQ(r[1], 0.0f);
  EXPECT_EQ(r[2], 2.0f);
  EXPECT_TRUE(std::isnan(r[3]));  // NaN propagates (PyTorch)
  EXPECT_EQ(r[4], 0.0f);
  Tensor i = relu(from_vector<int64_t>({-2, 0, 3}));
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(i), (std::vector<int64_t>{0, 0, 3}));
  EXPECT_THAT(error_of([] { relu(from_vector<bool>({true})); }), HasSubstr("relu: not supported for bool tensors"));
}

TEST(ClampTest, ReluInPlaceWritesThroughViewsAndBumpsVersion) {
  Tensor x = from_vector<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  const uint64_t v0 = x.version();
  Tensor col = x.select(1, 0);  // strided view: elements 0 and 3
  relu_(col);
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 2, -3, 4, -5, 6}));
  EXPECT_GT(x.version(), v0);
  Tensor& same = x.relu_();
  EXPECT_TRUE(same.is_same(x));
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

TEST(ClampTest, ClampBounds) {
  Tensor x = from_vector<float>({-2.0f, -0.5f, 0.25f, 1.0f, 3.0f, kNaN, -kInf, kInf});
  const std::vector<float> both = to_vector<float>(clamp(x, Scalar(-1.0), Scalar(1.0)));
  EXPECT_EQ(std::vector<float>(both.begin(), both.begin() + 5), (std::vector<float>{-1.0f, -0.5f, 0.25f, 1.0f, 1.0f}));
  EXPECT_TRUE(std::isnan(both[5]));
  EXPECT_EQ(both[6], -1.0f);
  EXPECT_EQ(both[7], 1.0f);
  // One-sided bounds leave the other side alone, infinities included.
  const std::vector<float> lo = to_vector<float>(x.clamp(Scalar(0), std::nullopt));
  EXPECT_EQ(lo[0], 0.0f);
  EXPECT_EQ(lo[4], 3.0f);
  EXPECT_EQ(lo[7], kInf);
  const std::vector<float> hi = to_vector<float>(x.clamp(std::nullopt, Scalar(0)));
  EXPECT_EQ(hi[0], -2.0f);
  EXPECT_EQ(hi[4], 0.0f);
  EXPECT_EQ(hi[6], -kInf);
}

TEST(ClampTest, MinAboveMaxGivesMax) {
  // PyTorch: clamp(tensor([1., 2., 3.]), min=2, max=1) = [1., 1., 1.]
  EXPECT_EQ(to_vector<float>(clamp(from_vector<float>({1, 2, 3}), Scalar(2), Scalar(1))), (std::vector<float>{1, 1, 1}));
}

TEST(ClampTest, IntegerTensorsKeepOrPromote) {
  Tensor i = from_vector<int64_t>({-2, 0, 3});
  Tensor c = clamp(i, Scalar(-1), Scalar(1));
  EXPECT_EQ(c.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(c), (std::vector<int64_t>{-1, 0, 1}));
  // PyTorch: clamp(tensor([-2, 0, 3]), min=0.5) = tensor([0.5, 0.5, 3.0])
  Tensor f = clamp(i, Scalar(0.5), std::nullopt);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(f), (std::vector<float>{0.5f, 0.5f, 3.0f}));
  // Extreme int64 values must not be clipped by an absent bound.
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(to_vector<int64_t>(clamp(from_vector<int64_t>({big, -big}), Scalar(0), std::nullopt)),
            (std::vector<int64_t>{big, 0}));
}

TEST(ClampTest, ClampInPlaceAndErrors) {
  Tensor x = from_vector<float>({-3, 0.5f, 7});
  const uint64_t v0 = x.version();
  clamp_(x, Scalar(0), Scalar(1));
  EXPECT_EQ(to_vector<float>(x), (std::vector<float>{0, 0.5f, 1}));
  EXPECT_GT(x.version(), v0);
  EXPECT_EQ(error_of([&] { clamp(x, std::nullopt, std::nullopt); }),
            "clamp: at least one of 'min' or 'max' must not be None");
  Tensor i = from_vector<int64_t>({1, 2});
  EXPECT_EQ(error_of([&] { i.clamp_(Scalar(0.5), std::nullopt); }),
            "clamp_: result dtype float32 cannot be cast to self's dtype int64");
}

// ---- pow / minimum / maximum -------------------------------------------------------------------

TEST(PowTest, ScalarExponentFastPathsMatchStdPow) {
  const std::vector<double> base = {0.25, 1.5, 3.0, 4.0, 10.0};
  Tensor x = from_vector<double>(base);
  for (double e : {2.0, 0.5, 3.0, -1.0, -0.5, -2.0, 2.7, 1.0, 0.0}) {
    std::vector<double> want;
    for (double b : base) want.push_back(std::pow(b, e));
    expect_near<double>(pow(x, Scalar(e)), want, 4e-16);
  }
  EXPECT_EQ(to_vector<float>(from_vector<float>({-3, 0.5f}).pow(Scalar(2))), (std::vector<float>{9, 0.25f}));
}

TEST(PowTest, MatchesPyTorch) {
  // torch.pow(tensor([1.5, -2.0, 0.3]), 2.7) = [2.988452673, nan, 0.038746051]
  const std::vector<float> p = to_vector<float>(pow(from_vector<float>({1.5f, -2.0f, 0.3f}), Scalar(2.7)));
  EXPECT_NEAR(p[0], 2.988452673f, 3e-7);
  EXPECT_TRUE(std::isnan(p[1]));
  EXPECT_NEAR(p[2], 0.038746051f, 1e-8);
  // torch.pow(tensor([4., 2.]), tensor([0.5, -1.5])) = [2.0, 0.3535533845]
  expect_near<float>(pow(from_vector<float>({4, 2}), from_vector<float>({0.5f, -1.5f})), {2.0f, 0.3535533845f}, 1e-7);
}

TEST(PowTest, TensorExponentBroadcasts) {
  Tensor b = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor e = from_vector<float>({0, 1, 2}, {3});
  Tensor y = pow(b, e);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{1, 1, 1, 1, 2, 4, 1, 3, 9}));
  EXPECT_EQ(error_of([] { pow(ones({2, 3}), ones({2})); }),
            "pow: shapes [2, 3] and [2] cannot be broadcast (dimension 1: 3 vs 2)");
}

TEST(PowTest, IntegerPowers) {
  Tensor i = from_vector<int64_t>({2, 3, -2, 0});
  Tensor c = pow(i, Scalar(3));
  EXPECT_EQ(c.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(c), (std::vector<int64_t>{8, 27, -8, 0}));
  EXPECT_EQ(to_vector<int64_t>(pow(i, Scalar(2))), (std::vector<int64_t>{4, 9, 4, 0}));
  EXPECT_EQ(to_vector<int64_t>(pow(i, Scalar(0))), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(to_vector<int32_t>(pow(from_vector<int32_t>({2}), Scalar(31 - 1))), (std::vector<int32_t>{1 << 30}));
  // PyTorch: pow(tensor([2, 1, -1, 0]), tensor([-1, -2, -3, -1])) = [0, 1, -1, 0]
  EXPECT_EQ(to_vector<int64_t>(pow(from_vector<int64_t>({2, 1, -1, 0}), from_vector<int64_t>({-1, -2, -3, -1}))),
            (std::vector<int64_t>{0, 1, -1, 0}));
  EXPECT_EQ(error_of([&] { pow(i, Scalar(-1)); }),
            "pow: integers to negative integer powers are not allowed (exponent -1)");
  // A float exponent promotes to float32, like PyTorch.
  Tensor h = pow(from_vector<int64_t>({4, 9}), Scalar(0.5));
  EXPECT_EQ(h.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(h), (std::vector<float>{2, 3}));
  EXPECT_EQ(pow(from_vector<int64_t>({2, 3}), from_vector<float>({2})).dtype(), DType::Float32);
  EXPECT_EQ(pow(from_vector<int32_t>({2}), Scalar(2)).dtype(), DType::Int32);
}

TEST(MinMaxTest, BroadcastAndPromote) {
  Tensor a = from_vector<float>({1, 5, 3, 8}, {2, 2});
  Tensor b = from_vector<float>({4, 2}, {2});
  EXPECT_EQ(to_vector<float>(minimum(a, b)), (std::vector<float>{1, 2, 3, 2}));
  EXPECT_EQ(to_vector<float>(a.maximum(b)), (std::vector<float>{4, 5, 4, 8}));
  // PyTorch: minimum(tensor([-2, 0, 3]), tensor([1.5])) = tensor([-2., 0., 1.5])
  Tensor m = minimum(from_vector<int64_t>({-2, 0, 3}), from_vector<float>({1.5f}));
  EXPECT_EQ(m.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(m), (std::vector<float>{-2, 0, 1.5f}));
  Tensor ints = maximum(from_vector<int32_t>({1, 7}), from_vector<int64_t>({3, 2}));
  EXPECT_EQ(ints.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(ints), (std::vector<int64_t>{3, 7}));
}

TEST(MinMaxTest, NaNPropagatesFromEitherSide) {
  // PyTorch: minimum(tensor([nan, 1.]), tensor([0., nan])) = [nan, nan]
  Tensor a = from_vector<float>({kNaN, 1.0f, 2.0f});
  Tensor b = from_vector<float>({0.0f, kNaN, 1.0f});
  for (const Tensor& r : {minimum(a, b), maximum(a, b)}) {
    const std::vector<float> v = to_vector<float>(r);
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_TRUE(std::isnan(v[1]));
  }
  EXPECT_EQ(to_vector<float>(minimum(a, b))[2], 1.0f);
  EXPECT_EQ(to_vector<float>(maximum(a, b))[2], 2.0f);
  EXPECT_EQ(error_of([] { maximum(ones({3}), ones({4})); }),
            "maximum: shapes [3] and [4] cannot be broadcast (dimension 0: 3 vs 4)");
}

// ---- comparisons and where ---------------------------------------------------------------------

TEST(CompareTest, TensorTensorComparisons) {
  Tensor a = from_vector<float>({1, 2, 3});
  Tensor b = from_vector<float>({3, 2, 1});
  EXPECT_EQ(bools(eq(a, b)), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(bools(ne(a, b)), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(bools(lt(a, b)), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(bools(le(a, b)), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(bools(gt(a, b)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(bools(ge(a, b)), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bools(a < b), bools(lt(a, b)));
  EXPECT_EQ(bools(a >= b), bools(ge(a, b)));
  EXPECT_EQ(bools(a == b), bools(eq(a, b)));
  EXPECT_EQ(bools(a != b), bools(ne(a, b)));
}

TEST(CompareTest, BroadcastAndPromote) {
  Tensor col = from_vector<int64_t>({1, 2}, {2, 1});
  Tensor row = from_vector<float>({1.0f, 1.5f, 2.0f});
  Tensor r = le(col, row);
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(bools(r), (std::vector<bool>{true, true, true, false, false, true}));
  // int64 vs float: compared after promotion, so 2 != 2.5 and 1 == 1.0.
  EXPECT_EQ(bools(eq(from_vector<int64_t>({1, 2}), from_vector<double>({1.0, 2.5}))), (std::vector<bool>{true, false}));
  EXPECT_EQ(error_of([] { eq(ones({2, 3}), ones({2})); }),
            "eq: shapes [2, 3] and [2] cannot be broadcast (dimension 1: 3 vs 2)");
}

TEST(CompareTest, ScalarComparisons) {
  Tensor f = from_vector<float>({1, 2, 3, kNaN});
  EXPECT_EQ(bools(gt(f, Scalar(2))), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(bools(f <= Scalar(2.5)), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(bools(f.eq(Scalar(2))), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(bools(f != Scalar(3)), (std::vector<bool>{true, true, false, true}));  // NaN != anything
  Tensor i = from_vector<int64_t>({1, 2, 3});
  EXPECT_EQ(bools(lt(i, Scalar(2.5))), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(bools(eq(i, Scalar(2.0))), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(bools(ge(i, Scalar(2))), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bools(ne(i, Scalar(2))), (std::vector<bool>{true, false, true}));
  // See Note [Comparing with a scalar]: out-of-range scalars are not wrapped.
  EXPECT_EQ(bools(lt(from_vector<int8_t>({1, 100}), Scalar(300))), (std::vector<bool>{true, true}));
  EXPECT_EQ(bools(eq(from_vector<bool>({true, false}), Scalar(1))), (std::vector<bool>{true, false}));
}

TEST(WhereTest, BroadcastsAllThree) {
  Tensor cond = from_vector<bool>({true, false}, {2, 1});
  Tensor x = from_vector<float>({1, 2, 3}, {1, 3});
  Tensor y = scalar_tensor(Scalar(-1.0));
  Tensor r = where(cond, x, y);
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(to_vector<float>(r), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  Tensor c2 = from_vector<bool>({true, false, true});
  EXPECT_EQ(to_vector<float>(where(c2, x, from_vector<float>({7, 8}, {2, 1}))), (std::vector<float>{1, 7, 3, 1, 8, 3}));
}

TEST(WhereTest, PromotesBranchesAndChecksCondition) {
  // PyTorch: where(tensor([T, F, T]), tensor([-2, 0, 3]), tensor(1.5)) = tensor([-2.0, 1.5, 3.0])
  Tensor r = where(from_vector<bool>({true, false, true}), from_vector<int64_t>({-2, 0, 3}), scalar_tensor(Scalar(1.5)));
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(r), (std::vector<float>{-2, 1.5f, 3}));
  Tensor i = from_vector<int64_t>({1, 0});
  EXPECT_EQ(error_of([&] { where(i, i, i); }), "where: expected condition to be a bool tensor, got int64");
  EXPECT_EQ(error_of([] { where(ones({3}, DType::Bool), ones({2}), ones({3})); }),
            "where: shapes [3] and [2] cannot be broadcast (dimension 0: 3 vs 2)");
  // Selection from a strided (transposed) operand.
  Tensor m = from_vector<float>({1, 2, 3, 4}, {2, 2}).t();
  EXPECT_EQ(to_vector<float>(where(gt(m, Scalar(1.5)), m, zeros({2, 2}))), (std::vector<float>{0, 3, 2, 4}));
}

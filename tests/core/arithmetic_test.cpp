#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

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

namespace {

std::string arith_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "<no error>";
}

}  // namespace

TEST(ArithmeticTest, TensorOperatorsAndAlpha) {
  Tensor a = from_vector<float>({1.5f, 2.5f});
  Tensor b = from_vector<float>({1.0f, 4.0f});
  EXPECT_EQ(to_vector<float>(a - b), (std::vector<float>{0.5f, -1.5f}));
  EXPECT_EQ(to_vector<float>(a * b), (std::vector<float>{1.5f, 10.0f}));
  EXPECT_EQ(to_vector<float>(a / b), (std::vector<float>{1.5f, 0.625f}));
  EXPECT_EQ(to_vector<float>(add(a, b, Scalar(2))), (std::vector<float>{3.5f, 10.5f}));
  // PyTorch: sub(tensor([1.5, 2.5]), tensor([1., 1.]), alpha=3) = [-1.5, -0.5]
  EXPECT_EQ(to_vector<float>(sub(a, ones({2}), Scalar(3))), (std::vector<float>{-1.5f, -0.5f}));
  EXPECT_EQ(to_vector<float>(a.add(b, Scalar(0.5))), (std::vector<float>{2.0f, 4.5f}));
  EXPECT_EQ(to_vector<float>(-a), (std::vector<float>{-1.5f, -2.5f}));
  EXPECT_EQ(arith_error_of([] { add(from_vector<int64_t>({1, 2}), from_vector<int64_t>({1, 2}), Scalar(2.5)); }),
            "add: for integral input tensors, argument alpha must not be a floating point number (got 2.5)");
}

TEST(ArithmeticTest, ScalarFormsAndReflectedOperators) {
  Tensor a = from_vector<float>({1, 2, 4});
  EXPECT_EQ(to_vector<float>(a + Scalar(1)), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ(to_vector<float>(a - Scalar(0.5)), (std::vector<float>{0.5f, 1.5f, 3.5f}));
  EXPECT_EQ(to_vector<float>(a * Scalar(3)), (std::vector<float>{3, 6, 12}));
  EXPECT_EQ(to_vector<float>(a / Scalar(4)), (std::vector<float>{0.25f, 0.5f, 1}));
  EXPECT_EQ(to_vector<float>(Scalar(1) + a), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ(to_vector<float>(Scalar(10) - a), (std::vector<float>{9, 8, 6}));
  EXPECT_EQ(to_vector<float>(Scalar(2) * a), (std::vector<float>{2, 4, 8}));
  EXPECT_EQ(to_vector<float>(Scalar(8) / a), (std::vector<float>{8, 4, 2}));
  EXPECT_EQ(to_vector<float>(rsub(a, Scalar(1))), (std::vector<float>{0, -1, -3}));
  EXPECT_EQ(to_vector<float>(rdiv(a, Scalar(1))), (std::vector<float>{1, 0.5f, 0.25f}));
}

TEST(ArithmeticTest, IntegerAndFloatPromotion) {
  Tensor i = from_vector<int64_t>({1, 2, 3});
  // int + int stays int; int32 + int64 is int64; int + float tensor or scalar is float32.
  EXPECT_EQ((i + i).dtype(), DType::Int64);
  Tensor mixed_ints = from_vector<int32_t>({1, 2}) + from_vector<int64_t>({1, 2});
  EXPECT_EQ(mixed_ints.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(mixed_ints), (std::vector<int64_t>{2, 4}));
  Tensor f = i + from_vector<float>({0.5f, 0.5f, 0.5f});
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(f), (std::vector<float>{1.5f, 2.5f, 3.5f}));
  EXPECT_EQ((i * Scalar(2)).dtype(), DType::Int64);
  EXPECT_EQ((i * Scalar(2.5)).dtype(), DType::Float32);
  EXPECT_EQ((from_vector<float>({1}) + from_vector<double>({1})).dtype(), DType::Float64);
  // PyTorch: 2 - tensor([1, 5]) = tensor([1, -3]) stays int64.
  Tensor r = Scalar(2) - from_vector<int64_t>({1, 5});
  EXPECT_EQ(r.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(r), (std::vector<int64_t>{1, -3}));
}

TEST(ArithmeticTest, DivisionOfIntegersIsTrueDivision) {
  // PyTorch: tensor([1, 2, 3]) / tensor([2, 2, 2]) = tensor([0.5, 1.0, 1.5])
  Tensor q = from_vector<int64_t>({1, 2, 3}) / from_vector<int64_t>({2, 2, 2});
  EXPECT_EQ(q.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(q), (std::vector<float>{0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(to_vector<float>(from_vector<int64_t>({7, -7}) / Scalar(2)), (std::vector<float>{3.5f, -3.5f}));
  Tensor r = Scalar(6) / from_vector<int64_t>({1, 2, 4});
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(r), (std::vector<float>{6, 3, 1.5f}));
  const std::vector<float> z = to_vector<float>(from_vector<float>({1, 0, -1}) / Scalar(0));
  EXPECT_EQ(z[0], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(z[1]));
  EXPECT_EQ(z[2], -std::numeric_limits<float>::infinity());
}

TEST(ArithmeticTest, BoolArithmetic) {
  Tensor b = from_vector<bool>({true, false});
  // PyTorch: b + b = [True, False], b * b = [True, False], b + 1 = [2, 1], b * 2.5 = [2.5, 0.]
  EXPECT_EQ(to_vector<bool>(b + b), (std::vector<bool>{true, false}));
  EXPECT_EQ(to_vector<bool>(b * b), (std::vector<bool>{true, false}));
  EXPECT_EQ(to_vector<int64_t>(b + Scalar(1)), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(to_vector<float>(b * Scalar(2.5)), (std::vector<float>{2.5f, 0.0f}));
  EXPECT_THAT(arith_error_of([&] { sub(b, b); }), ::testing::HasSubstr("sub: not supported for bool tensors"));
}

TEST(ArithmeticTest, InPlaceOpsWriteSelfAndBumpVersion) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  const uint64_t v0 = a.version();
  a += from_vector<float>({10, 20});  // broadcast other
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{11, 22, 13, 24}));
  EXPECT_GT(a.version(), v0);
  a -= Scalar(1);
  a *= Scalar(2);
  a /= from_vector<float>({2, 4}, {2, 1});
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{10, 21, 6, 11.5f}));
  a.add_(ones({2, 2}), Scalar(3)).sub_(ones({2}), Scalar(2)).mul_(ones({2, 2}));
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{11, 22, 7, 12.5f}));
  a.div_(Scalar(0.5));
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{22, 44, 14, 25}));
}

TEST(ArithmeticTest, InPlaceCastingRules) {
  // Within a category the result is narrowed to self's dtype, like PyTorch.
  Tensor f = ones({2});
  f += from_vector<double>({0.5, 1.5});
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(f), (std::vector<float>{1.5f, 2.5f}));
  Tensor i8 = from_vector<int8_t>({100});
  i8 += from_vector<int64_t>({100});
  EXPECT_EQ(to_vector<int8_t>(i8), (std::vector<int8_t>{-56}));  // wraps, PyTorch: tensor([-56], dtype=torch.int8)
  Tensor i = from_vector<int64_t>({1, 2});
  EXPECT_EQ(arith_error_of([&] { i += Scalar(0.5); }), "add_: result dtype float32 cannot be cast to self's dtype int64");
  EXPECT_EQ(arith_error_of([&] { i /= Scalar(2); }), "div_: result dtype float32 cannot be cast to self's dtype int64");
  Tensor row = ones({3});
  EXPECT_EQ(arith_error_of([&] { row += ones({2, 3}); }),
            "add_: result of shape [2, 3] cannot be written into self of shape [3]");
}

TEST(ArithmeticTest, BadBroadcastNamesOpAndShapes) {
  EXPECT_EQ(arith_error_of([] { add(ones({2, 3}), ones({4})); }),
            "add: shapes [2, 3] and [4] cannot be broadcast (dimension 1: 3 vs 4)");
  EXPECT_EQ(arith_error_of([] { ones({5}) / ones({2}); }),
            "div: shapes [5] and [2] cannot be broadcast (dimension 0: 5 vs 2)");
}

// Gradients of the reductions: gradcheck over several dim sets with keepdim both ways, and
// the tie rules PyTorch 1.13 uses (even split for max()/amax, first index for max(dim)).
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

Tensor input(const IntList& sizes) { return randn(sizes, DType::Float64).requires_grad_(); }

void expect_grad(const Tensor& x, const std::vector<double>& want) {
  ASSERT_TRUE(x.grad().defined());
  const auto got = to_vector<double>(x.grad());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

const std::vector<IntList> kDimSets = {{}, {0}, {-1}, {0, 2}, {1, -1}};

}  // namespace

TEST(ReduceGradTest, SumGradcheck) {
  for (const IntList& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dims " << dims.size() << " keepdim " << keepdim);
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return sum(in[0], dims, keepdim); }, {input({2, 3, 4})}));
    }
}

TEST(ReduceGradTest, SumGradIsOnesExpandedBack) {
  Tensor x = input({2, 3});
  Tensor y = sum(x, {1});
  EXPECT_EQ(y.grad_fn_name(), "SumBackward");
  y.backward(from_vector<double>({2, 5}));
  expect_grad(x, {2, 2, 2, 5, 5, 5});
}

TEST(ReduceGradTest, SumOfNonContiguousInputGradcheck) {
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return sum(in[0].transpose(0, 2), {0, 1}); }, {input({2, 3, 4})}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return sum(in[0].slice(1, 0, std::nullopt, 2), {-1}, true); },
                        {input({3, 5})}));
}

TEST(ReduceGradTest, MeanGradcheck) {
  for (const IntList& dims : kDimSets)
    for (bool keepdim : {false, true})
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return mean(in[0], dims, keepdim); }, {input({2, 3, 4})}));
}

TEST(ReduceGradTest, VarAndStdGradcheck) {
  for (const IntList& dims : kDimSets)
    for (bool unbiased : {true, false})
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dims " << dims.size() << " unbiased " << unbiased << " keepdim " << keepdim);
        EXPECT_TRUE(gradcheck([&](const TensorList& in) { return var(in[0], dims, unbiased, keepdim); }, {input({2, 3, 4})}));
        EXPECT_TRUE(gradcheck([&](const TensorList& in) { return qflow::std(in[0], dims, unbiased, keepdim); },
                              {input({2, 3, 4})}));
      }
}

// The derivative of std does not exist where std is 0; like PyTorch it is taken as 0 there.
TEST(ReduceGradTest, StdOfConstantHasZeroGrad) {
  Tensor x = ones({3}, DType::Float64).requires_grad_();
  Tensor s = qflow::std(x);
  EXPECT_EQ(s.grad_fn_name(), "StdBackward");
  s.backward();
  expect_grad(x, {0, 0, 0});
}

TEST(ReduceGradTest, LogsumexpGradcheck) {
  for (const IntList& dims : kDimSets)
    for (bool keepdim : {false, true})
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return logsumexp(in[0], dims, keepdim); }, {input({2, 3, 4})}));
}

TEST(ReduceGradTest, LogsumexpGradMatchesPyTorch) {
  Tensor x = from_vector<double>({1, 3, 3, 2, 1, 1}, {2, 3}).requires_grad_();
  logsumexp(x, {1}).backward(from_vector<double>({1, 2}));
  expect_grad(x, {0.06337893833303763, 0.4683105308334813, 0.4683105308334813, 1.152233769531658, 0.4238831152341708,
                  0.4238831152341708});
}

TEST(ReduceGradTest, SumToGradcheck) {
  for (const IntList& target : std::vector<IntList>{{3, 1}, {1, 3, 4}, {4}, {}, {2, 3, 4}})
    EXPECT_TRUE(gradcheck([&](const TensorList& in) { return sum_to(in[0], target); }, {input({2, 3, 4})}));
}

// The engine sums broadcast gradients with sum_to: a (3, 1) and a (4,) operand.
TEST(ReduceGradTest, BroadcastGradientsAreSummedBack) {
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return sum(mul(in[0], in[1]), {0}); }, {input({3, 1}), input({4})}));
  Tensor a = ones({3, 1}, DType::Float64).requires_grad_();
  Tensor b = from_vector<double>({1, 2, 3, 4}).requires_grad_();
  sum(mul(a, b)).backward();
  expect_grad(a, {10, 10, 10});
  expect_grad(b, {3, 3, 3, 3});
}

TEST(ReduceGradTest, MaxMinOfEverythingGradcheck) {
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return max(in[0]); }, {input({3, 4})}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return min(in[0].t()); }, {input({3, 4})}));
}

TEST(ReduceGradTest, MaxOfEverythingSplitsGradEvenlyAmongTies) {
  Tensor x = from_vector<double>({1, 3, 3, 2}).requires_grad_();
  Tensor m = max(x);
  EXPECT_EQ(m.grad_fn_name(), "MaxBackward");
  m.backward();
  expect_grad(x, {0, 0.5, 0.5, 0});
  Tensor y = from_vector<double>({1, 3, 3, 2, 1, 1}, {2, 3}).requires_grad_();
  min(y).backward();
  expect_grad(y, {1.0 / 3, 0, 0, 0, 1.0 / 3, 1.0 / 3});
}

TEST(ReduceGradTest, MaxMinDimGradcheck) {
  for (int64_t dim : {0, 1, -1})
    for (bool keepdim : {false, true}) {
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return std::get<0>(max(in[0], dim, keepdim)); }, {input({3, 4, 2})}));
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return std::get<0>(min(in[0], dim, keepdim)); }, {input({3, 4, 2})}));
    }
}

TEST(ReduceGradTest, MaxDimSendsGradToTheReportedIndexOnly) {
  Tensor x = from_vector<double>({1, 3, 3, 2, 2, 1}, {2, 3}).requires_grad_();
  auto [values, indices] = max(x, 1);
  EXPECT_FALSE(indices.requires_grad());
  values.backward(from_vector<double>({1, 2}));
  expect_grad(x, {0, 1, 0, 2, 0, 0});
}

TEST(ReduceGradTest, AmaxAminGradcheck) {
  for (const IntList& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return amax(in[0], dims, keepdim); }, {input({2, 3, 4})}));
      EXPECT_TRUE(gradcheck([&](const TensorList& in) { return amin(in[0], dims, keepdim); }, {input({2, 3, 4})}));
    }
}

TEST(ReduceGradTest, AmaxSplitsGradEvenlyAmongTiesOfEachSlice) {
  Tensor x = from_vector<double>({1, 3, 3, 2, 2, 1}, {2, 3}).requires_grad_();
  amax(x, {1}).backward(from_vector<double>({1, 2}));
  expect_grad(x, {0, 0.5, 0.5, 1, 1, 0});
}

TEST(ReduceGradTest, ArgmaxIsNotDifferentiable) {
  Tensor x = input({3, 4});
  Tensor i = argmax(x, 1);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_FALSE(argmin(x).requires_grad());
}

// A reduction in the middle of a chain: mean-centred values, then a norm-like reduction.
TEST(ReduceGradTest, ComposedReductionsGradcheck) {
  EXPECT_TRUE(gradcheck(
      [](const TensorList& in) {
        Tensor centred = sub(in[0], mean(in[0], {1}, true));
        return sum(div(centred, qflow::std(in[0], {1}, true, true)), {0});
      },
      {input({4, 5})}));
}

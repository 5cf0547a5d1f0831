// cat, stack, index_select, index_add: values (goldens from PyTorch 1.13), dtype promotion,
// layouts, the multi-threaded copy paths, and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

using ::qflow::testing_util::error_of;  // tests/error_of.h

// The 3x4 matrix the goldens below were computed from.
Tensor sample() {
  return from_vector<float>({0.5f, -1.25f, 2.0f, 3.5f, 4.0f, -0.75f, 6.25f, 7.0f, 8.5f, 9.0f, -10.0f, 11.25f}, {3, 4});
}

using Sizes = std::vector<int64_t>;

}  // namespace

// ---- cat -------------------------------------------------------------------------------------

TEST(CatTest, JoinsAlongDim0) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({7, 8, 9}, {1, 3});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.sizes(), (Sizes{3, 3}));
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(CatTest, JoinsAlongLastDimWithNegativeDim) {
  Tensor a = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<int64_t>({5, 6, 7, 8, 9, 10}, {2, 3});
  Tensor c = cat({a, b}, -1);
  EXPECT_EQ(c.sizes(), (Sizes{2, 5}));
  EXPECT_EQ(to_vector<int64_t>(c), (std::vector<int64_t>{1, 2, 5, 6, 7, 3, 4, 8, 9, 10}));
}

TEST(CatTest, NonContiguousInputsMatchPyTorch) {
  // torch.cat([x[:, :2], x.t()[1:3].t()], 1)
  Tensor x = sample();
  Tensor c = cat({x.narrow(1, 0, 2), x.t().slice(0, 1, 3).t()}, 1);
  EXPECT_EQ(c.sizes(), (Sizes{3, 4}));
  EXPECT_EQ(to_vector<float>(c),
            (std::vector<float>{0.5f, -1.25f, -1.25f, 2.0f, 4.0f, -0.75f, -0.75f, 6.25f, 8.5f, 9.0f, 9.0f, -10.0f}));
}

TEST(CatTest, PromotesDtypesLikePyTorch) {
  Tensor a = from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({0.5f, 1.5f}, {1, 2});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{1, 2, 3, 4, 0.5f, 1.5f}));

  Tensor d = cat({from_vector<bool>({true, false}), from_vector<int64_t>({7, 8})});
  EXPECT_EQ(d.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(d), (std::vector<int64_t>{1, 0, 7, 8}));

  // PyTorch gives int16 here; qflow has no int16, and promote_types picks int32.
  Tensor e = cat({from_vector<uint8_t>({1, 2}), from_vector<int8_t>({-1})});
  EXPECT_EQ(e.dtype(), DType::Int32);
  EXPECT_EQ(to_vector<int32_t>(e), (std::vector<int32_t>{1, 2, -1}));
}

TEST(CatTest, SkipsLegacyEmptyVectors) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor c = cat({zeros({0}), a, zeros({0})});
  EXPECT_EQ(c.sizes(), (Sizes{2, 3}));
  EXPECT_EQ(to_vector<float>(c), to_vector<float>(a));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).sizes(), (Sizes{0}));
}

TEST(CatTest, EmptySlicesAlongTheDimAreFine) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor c = cat({a, zeros({2, 0}), a}, 1);
  EXPECT_EQ(c.sizes(), (Sizes{2, 4}));
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
}

TEST(CatTest, LargeInputsTakeTheParallelPathsCorrectly) {
  // Big enough that copy_rows splits rows (dim 0) and many short rows (dim 1) across threads.
  Tensor a = arange(0, 512 * 300).to(DType::Float32).view({512, 300});
  Tensor b = arange(0, 512 * 200).to(DType::Float32).view({512, 200}) * -1.0;
  Tensor c = cat({a, b}, 1);
  ASSERT_EQ(c.sizes(), (Sizes{512, 500}));
  EXPECT_EQ(to_vector<float>(c.narrow(1, 0, 300)), to_vector<float>(a));
  EXPECT_EQ(to_vector<float>(c.narrow(1, 300, 200)), to_vector<float>(b));

  Tensor d = cat({a, a.t().contiguous().t(), a}, 0);  // middle one goes through the strided copy
  ASSERT_EQ(d.sizes(), (Sizes{1536, 300}));
  for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(to_vector<float>(d.narrow(0, 512 * k, 512)), to_vector<float>(a));
}

TEST(CatTest, ErrorsNameTheShapesAndTheDim) {
  EXPECT_THAT(error_of([] { cat({}); }), HasSubstr("cat: expected a non-empty list of tensors"));
  EXPECT_THAT(error_of([] { cat({zeros({2, 3}), zeros({2, 4})}); }),
              HasSubstr("cat: sizes of tensors must match except in dimension 0: tensor 0 has shape [2, 3] but tensor 1 "
                        "has shape [2, 4] (dimension 1: 3 vs 4)"));
  EXPECT_THAT(error_of([] { cat({zeros({2, 3}), zeros({3})}, 1); }),
              HasSubstr("cat: tensors must have the same number of dimensions: tensor 0 has shape [2, 3] but tensor 1 has "
                        "shape [3]"));
  EXPECT_THAT(error_of([] { cat({zeros({2}), scalar_tensor(1.0)}); }),
              HasSubstr("cat: zero-dimensional tensor (at position 1) cannot be concatenated"));
  EXPECT_THAT(error_of([] { cat({zeros({2, 3})}, 2); }), HasSubstr("cat: dimension 2 out of range"));
}

// ---- stack -------------------------------------------------------------------------------------

TEST(StackTest, NewLeadingDim) {
  Tensor s = stack({from_vector<float>({1, 2}), from_vector<float>({3, 4}), from_vector<float>({5, 6})});
  EXPECT_EQ(s.sizes(), (Sizes{3, 2}));
  EXPECT_EQ(to_vector<float>(s), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(StackTest, NewLastDimMatchesPyTorch) {
  // torch.stack([x[0], x[2]], 1)
  Tensor x = sample();
  Tensor s = stack({x.select(0, 0), x.select(0, 2)}, 1);
  EXPECT_EQ(s.sizes(), (Sizes{4, 2}));
  EXPECT_EQ(to_vector<float>(s), (std::vector<float>{0.5f, 8.5f, -1.25f, 9.0f, 2.0f, -10.0f, 3.5f, 11.25f}));
  EXPECT_EQ(stack({zeros({2, 3}), ones({2, 3})}, -1).sizes(), (Sizes{2, 3, 2}));
}

TEST(StackTest, ZeroDimTensorsAndPromotion) {
  Tensor s = stack({scalar_tensor(1.5, DType::Float64), scalar_tensor(2, DType::Int64)});
  EXPECT_EQ(s.dtype(), DType::Float64);
  EXPECT_EQ(to_vector<double>(s), (std::vector<double>{1.5, 2.0}));
}

TEST(StackTest, Errors) {
  EXPECT_THAT(error_of([] { stack({}); }), HasSubstr("stack: expected a non-empty list of tensors"));
  EXPECT_THAT(error_of([] { stack({zeros({2}), zeros({3})}); }),
              HasSubstr("stack: expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"));
  EXPECT_THAT(error_of([] { stack({zeros({2}), zeros({2})}, 2); }), HasSubstr("stack: dimension 2 out of range"));
}

// ---- index_select --------------------------------------------------------------------------------

TEST(IndexSelectTest, RowsWithRepeatsMatchPyTorch) {
  Tensor y = sample().index_select(0, from_vector<int64_t>({2, 0, 2}));
  EXPECT_EQ(y.sizes(), (Sizes{3, 4}));
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{8.5f, 9.0f, -10.0f, 11.25f, 0.5f, -1.25f, 2.0f, 3.5f, 8.5f, 9.0f,
                                                      -10.0f, 11.25f}));
}

TEST(IndexSelectTest, ColumnsWithInt32Index) {
  Tensor y = index_select(sample(), 1, from_vector<int32_t>({3, 1}));
  EXPECT_EQ(y.sizes(), (Sizes{3, 2}));
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{3.5f, -1.25f, 7.0f, -0.75f, 11.25f, 9.0f}));
}

TEST(IndexSelectTest, NonContiguousInputAndZeroDimIndex) {
  Tensor y = sample().t().index_select(1, from_vector<int64_t>({1}));
  EXPECT_EQ(y.sizes(), (Sizes{4, 1}));
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{4.0f, -0.75f, 6.25f, 7.0f}));
  Tensor z = sample().index_select(-1, scalar_tensor(2, DType::Int64));  // keeps the dim, like PyTorch
  EXPECT_EQ(z.sizes(), (Sizes{3, 1}));
  EXPECT_EQ(to_vector<float>(z), (std::vector<float>{2.0f, 6.25f, -10.0f}));
  Tensor s = scalar_tensor(5.0).index_select(0, from_vector<int64_t>({0}));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 5.0);
}

TEST(IndexSelectTest, LargeGatherAcrossThreads) {
  Tensor x = arange(0, 4000 * 16).to(DType::Int32).view({4000, 16});
  Tensor idx = arange(3999, -1, -1);  // reversed rows
  Tensor y = x.index_select(0, idx);
  std::vector<int32_t> v = to_vector<int32_t>(y);
  ASSERT_EQ(v.size(), 4000u * 16u);
  EXPECT_EQ(v[0], 3999 * 16);
  EXPECT_EQ(v[16 * 3999 + 5], 5);
  std::vector<int32_t> col = to_vector<int32_t>(x.index_select(1, from_vector<int64_t>({15})));
  EXPECT_EQ(col[1234], 1234 * 16 + 15);
}

TEST(IndexSelectTest, Errors) {
  EXPECT_THAT(error_of([] { sample().index_select(0, from_vector<int64_t>({0, 3})); }),
              HasSubstr("index_select: index 3 (at position 1) is out of range for dimension 0 of size 3"));
  EXPECT_THAT(error_of([] { sample().index_select(1, from_vector<int64_t>({-1})); }),
              HasSubstr("index_select: index -1 (at position 0) is out of range for dimension 1 of size 4"));
  EXPECT_THAT(error_of([] { sample().index_select(0, from_vector<float>({1.0f})); }),
              HasSubstr("index_select: expected dtype int32 or int64 for index, got float32"));
  EXPECT_THAT(error_of([] { sample().index_select(0, zeros({1, 1}, DType::Int64)); }),
              HasSubstr("index_select: index must be a vector (0-d or 1-d), got shape [1, 1]"));
  EXPECT_THAT(error_of([] { sample().index_select(2, from_vector<int64_t>({0})); }),
              HasSubstr("index_select: dimension 2 out of range"));
}

// ---- index_add -----------------------------------------------------------------------------------

TEST(IndexAddTest, RepeatedIndicesAccumulateWithAlpha) {
  // torch.zeros(3, 4).index_add(1, [1, 1, 3], x.index_select(1, [0, 1, 2]), alpha=0.5)
  Tensor src = sample().index_select(1, from_vector<int64_t>({0, 1, 2}));
  Tensor y = index_add(zeros({3, 4}), 1, from_vector<int64_t>({1, 1, 3}), src, 0.5);
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{0.0f, -0.375f, 0.0f, 1.0f, 0.0f, 1.625f, 0.0f, 3.125f, 0.0f, 8.75f,
                                                      0.0f, -5.0f}));
}

TEST(IndexAddTest, IntegerDtypeAndSelfUnchanged) {
  Tensor self = from_vector<int64_t>({0, 0, 0});
  Tensor y = index_add(self, 0, from_vector<int64_t>({0, 0, 2}), from_vector<int64_t>({1, 2, 3}), 2);
  EXPECT_EQ(to_vector<int64_t>(y), (std::vector<int64_t>{6, 0, 6}));
  EXPECT_EQ(to_vector<int64_t>(self), (std::vector<int64_t>{0, 0, 0}));
}

TEST(IndexAddTest, ManyRowsIntoFewAcrossThreads) {
  // 100000 rows summed into 10 buckets by row % 10 (embedding-backward shaped).
  const int64_t n = 100000;
  std::vector<int64_t> buckets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) buckets[static_cast<size_t>(i)] = i % 10;
  Tensor idx = from_vector<int64_t>(buckets);
  Tensor y = index_add(zeros({10, 3}, DType::Float64), 0, idx, ones({n, 3}, DType::Float64));
  EXPECT_EQ(to_vector<double>(y), std::vector<double>(30, 10000.0));
}

TEST(IndexAddTest, Errors) {
  EXPECT_THAT(error_of([] { index_add(zeros({3}), 0, from_vector<int64_t>({0}), ones({1}, DType::Float64)); }),
              HasSubstr("index_add: self (float32) and source (float64) must have the same dtype"));
  EXPECT_THAT(error_of([] { index_add(zeros({3, 2}), 0, from_vector<int64_t>({0, 1}), ones({3, 2})); }),
              HasSubstr("index_add: number of indices (2) must equal source.size(0) = 3 (source shape [3, 2])"));
  EXPECT_THAT(error_of([] { index_add(zeros({3, 2}), 0, from_vector<int64_t>({0, 1}), ones({2, 3})); }),
              HasSubstr("must match except in dimension 0 (dimension 1: 2 vs 3)"));
  EXPECT_THAT(error_of([] { index_add(zeros({3}), 0, from_vector<int64_t>({0, 3}), ones({2})); }),
              HasSubstr("index_add: index 3 (at position 1) is out of range for dimension 0 of size 3"));
}

// Findings of the ASan + UBSan run (tools/run-tests --sanitize), each kept as a test. Under the
// sanitizers the old code failed these tests; in other builds they check the same values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

// fill_ used to read each destination element before overwriting it; full/zeros of Bool read
// fresh memory (ASan fills it with 0xbe), and loading 0xbe as a bool is undefined behaviour.
TEST(SanitizerRegressionTest, FullAndZerosOfBoolNeverReadTheFreshMemory) {
  EXPECT_EQ(to_vector<bool>(full({3}, Scalar(true), DType::Bool)), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(to_vector<bool>(zeros({2}, DType::Bool)), (std::vector<bool>{false, false}));
  Tensor big = full({70000}, Scalar(true), DType::Bool);  // above the parallel grain
  const std::vector<bool> v = to_vector<bool>(big);
  EXPECT_EQ(std::count(v.begin(), v.end(), true), 70000);
}

TEST(SanitizerRegressionTest, FillOfAStridedViewWritesOnlyTheView) {
  Tensor t = zeros({3, 4}, DType::Int32);
  Tensor column = t.narrow(1, 1, 1);  // strides (4, 1): one element per row
  column.fill_(Scalar(7));
  EXPECT_EQ(to_vector<int32_t>(t), (std::vector<int32_t>{0, 7, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0}));
  Tensor rows = t.transpose(0, 1).narrow(0, 3, 1);  // the last column, strides (1, 4) -> (4)
  rows.fill_(Scalar(-1));
  EXPECT_EQ(to_vector<int32_t>(t), (std::vector<int32_t>{0, 7, 0, -1, 0, 7, 0, -1, 0, 7, 0, -1}));
}

// Integer powers overflowed int32/int64 (signed overflow is undefined behaviour, even in the
// square the loop computed after the last bit). They wrap around like PyTorch's:
// torch.pow(torch.tensor([3, -3, 65536], dtype=torch.int32), 21) = [1870418611, -1870418611, 0]
// torch.pow(torch.tensor([3]), 41) = [-420491770248316829]
// torch.pow(torch.tensor([65536, 3037000500]), 2) = [4294967296, -9223372036709301616]
// torch.pow(torch.tensor([65536, -46341], dtype=torch.int32), 2) = [0, -2147479015]
TEST(SanitizerRegressionTest, IntegerPowersWrapAroundLikePyTorch) {
  EXPECT_EQ(to_vector<int32_t>(pow(from_vector<int32_t>({3, -3, 65536}), Scalar(21))),
            (std::vector<int32_t>{1870418611, -1870418611, 0}));
  EXPECT_EQ(to_vector<int64_t>(pow(from_vector<int64_t>({3}), Scalar(41))), (std::vector<int64_t>{-420491770248316829}));
  EXPECT_EQ(to_vector<int64_t>(pow(from_vector<int64_t>({65536, 3037000500}), Scalar(2))),
            (std::vector<int64_t>{4294967296, -9223372036709301616}));
  EXPECT_EQ(to_vector<int32_t>(pow(from_vector<int32_t>({65536, -46341}), Scalar(2))),
            (std::vector<int32_t>{0, -2147479015}));
  EXPECT_EQ(to_vector<int32_t>(pow(from_vector<int32_t>({2}), Scalar(30))), (std::vector<int32_t>{1 << 30}));
}

}  // namespace

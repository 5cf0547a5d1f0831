#pragma once
// What every CUDA test shares: skipping where there is no GPU (with the reason), strict float32
// (Note [TF32]), and comparing a CUDA result with the CPU kernel's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compare.h"
#include "qflow/core/device_runtime.h"
#include "qflow/core/error.h"
#include "qflow/core/factory.h"
#include "qflow/core/tensor.h"

namespace qflow::testing {

/// Empty when cuda:0 is usable; else why not (cudaGetDeviceCount's error on a machine without a driver).
inline std::string cuda_unavailable_reason() {
  try {
    device_runtime(Device::cuda(0));
    return "";
  } catch (const Error& e) {
    return e.message();
  }
}

/// The GPU the tests run on.
inline Device gpu() { return Device::cuda(0); }

/// The memory orders the kernels are tested in (logical sizes unchanged).
enum class Layout { NCHW, ChannelsLast, Strided };
inline const char* name(Layout l) {
  return l == Layout::NCHW ? "NCHW" : (l == Layout::ChannelsLast ? "channels-last" : "strided");
}

/// t's values in channels-last order (NHWC strides on the logical NCHW sizes), on t's device.
inline Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

/// Whether t (4-d) is laid out channels-last: NHWC strides on every dimension longer than 1
/// (a size-1 dimension's stride is arbitrary, and contiguous() keeps whatever it had).
inline bool is_channels_last(const Tensor& t) {
  const auto& s = t.sizes();
  if (s.size() != 4) return false;
  const std::vector<int64_t> want{s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
  for (size_t d = 0; d < 4; ++d)
    if (s[d] > 1 && t.strides()[d] != want[d]) return false;
  return true;
}

/// A standard-normal CPU tensor from its own seed.
inline Tensor randn_cpu(const IntList& sizes, uint64_t seed, DType dtype = DType::Float32) {
  Generator gen(seed);
  return randn(sizes, dtype, &gen);
}

/// `got` (a GPU result) has want's sizes and dtype and its values within `tol` (relative to
/// want's largest element, tests/compare.h).
inline void expect_match(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_TRUE(got.device().is_cuda()) << what;
  EXPECT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_LE(testing_util::relative_error(got.cpu(), want), tol) << what;
}

}  // namespace qflow::testing

/// First statement of every GPU test: skips with the reason where there is no GPU, and turns
/// TF32 off so results compare with the CPU's at float32 tolerances.
#define QFLOW_REQUIRE_CUDA()                                                     \
  do {                                                                           \
    if (const std::string why = ::qflow::testing::cuda_unavailable_reason(); !why.empty()) \
      GTEST_SKIP() << why;                                                       \
    ::qflow::set_allow_tf32(false);                                              \
  } while (0)

#pragma once
// Inputs and comparisons the layer tests share. The generators are exactly the ones the
// golden scripts use (tests/core/goldens/*.py, tests/golden/*.py), so each variant is named
// for what it computes: a test tied to golden values must keep the variant its script uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "compare.h"
#include "qflow/qflow.h"

namespace qflow::testing_util {

namespace detail {
inline std::vector<double> sin_values(const IntList& shape, double seed, double scale, int64_t first) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37 * static_cast<double>(i + first) + seed) * scale;
  return v;
}
}  // namespace detail

/// sin(0.37·i + seed)·scale for i = 0, 1, ... in row-major order, computed in float64 and cast
/// to `dtype` (tests/core/goldens/nn_ops.py's seq).
inline Tensor sin_seq(const IntList& shape, double seed, double scale = 1.0, DType dtype = DType::Float32) {
  return from_vector<double>(detail::sin_values(shape, seed, scale, 0), shape).to(dtype);
}

/// sin_seq rounded to float32 first, then cast to `dtype`: the float32 inputs a golden script
/// fed PyTorch, also where the test computes in float64 (tests/core/goldens/conv_pool.py).
inline Tensor sin_seq_f32(const IntList& shape, double seed, double scale = 1.0, DType dtype = DType::Float32) {
  return from_vector<double>(detail::sin_values(shape, seed, scale, 0), shape).to(DType::Float32).to(dtype);
}

/// float32(scale·sin(0.37·(i + 1) + seed)), counting from 1, then cast to `dtype`: the seq of
/// tests/golden/*.py (the nn layers' and fake quantization's goldens).
inline Tensor sin_seq_from1_f32(const IntList& shape, double seed, double scale = 1.0, DType dtype = DType::Float32) {
  return from_vector<double>(detail::sin_values(shape, seed, scale, 1), shape).to(DType::Float32).to(dtype);
}

/// arange(numel)·scale + shift in `dtype`, reshaped: exact small values for linear algebra.
inline Tensor ramp(const IntList& shape, double scale, double shift, DType dtype = DType::Float32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (arange(0, n, 1, dtype) * scale + shift).reshape(SymIntList(shape.begin(), shape.end()));
}

// The comparisons below follow compare.h: NaN or Inf fails where the expected value is finite,
// and an expected NaN or ±Inf (written down by hand) must be reproduced exactly.

/// |actual_i − expected_i| <= atol + rtol·|expected_i| for every element (stops at the first miss).
inline void expect_close(const Tensor& actual, const std::vector<double>& expected, double rtol = 1e-5, double atol = 1e-6) {
  const std::vector<double> a = to_vector<double>(actual);
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_TRUE(close_enough(a[i], expected[i], rtol, atol, NonFinite::kMustMatch))
        << "element " << i << ": " << a[i] << " vs " << expected[i] << " (tolerance " << atol << " + " << rtol << "·|want|)";
}

/// The shape, then |actual_i − expected_i| <= tol·(1 + |expected_i|) (stops at the first miss).
inline void expect_close(const Tensor& actual, const IntList& shape, const std::vector<double>& expected, double tol = 1e-6) {
  EXPECT_EQ(actual.sizes(), shape);
  const std::vector<double> a = to_vector<double>(actual);
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_TRUE(close_enough(a[i], expected[i], tol, tol, NonFinite::kMustMatch))
        << "element " << i << ": " << a[i] << " vs " << expected[i] << " (tolerance " << tol << "·(1 + |want|))";
}

/// The shape, then |actual_i − expected_i| <= tol·max(1, |expected_i|): absolute below 1,
/// relative above (reports every miss).
inline void expect_close_abs_below_one(const Tensor& actual, const IntList& shape, const std::vector<double>& expected,
                                       double tol = 1e-5) {
  ASSERT_EQ(actual.sizes(), shape);
  const std::vector<double> a = to_vector<double>(actual);
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(close_enough(a[i], expected[i], 0, tol * std::max(1.0, std::abs(expected[i])), NonFinite::kMustMatch))
        << "at " << i << ": " << a[i] << " vs " << expected[i] << " (tolerance " << tol << "·max(1, |want|))";
}

}  // namespace qflow::testing_util

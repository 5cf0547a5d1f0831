#pragma once
// Helpers shared by the quant tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "qflow/qflow.h"
#include "qflow/quant/fake_quantize.h"
#include "qflow/quant/qparams.h"
#include "compare.h"
#include "error_of.h"

namespace quant_test {

inline qflow::Tensor vec(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return qflow::from_vector<float>(v, {n});
}

inline std::vector<float> values(const qflow::Tensor& t) { return qflow::to_vector<float>(t.to(qflow::DType::Float32)); }

using ::qflow::testing_util::error_of;  // tests/error_of.h

/// |got - want| <= rtol * |want| + atol elementwise, after a shape check. NaN or Inf on either
/// side fails (tests/compare.h): the references here are computed by qflow too.
inline void expect_close(const qflow::Tensor& got, const qflow::Tensor& want, double rtol, double atol = 0.0,
                         const std::string& what = "") {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  qflow::testing_util::expect_all_close(qflow::to_vector<double>(got), qflow::to_vector<double>(want), rtol, atol,
                                        qflow::testing_util::NonFinite::kFail, what);
}

}  // namespace quant_test

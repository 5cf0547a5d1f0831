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
#include "error_of.h"

namespace quant_test {

inline qflow::Tensor vec(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return qflow::from_vector<float>(v, {n});
}

inline std::vector<float> values(const qflow::Tensor& t) { return qflow::to_vector<float>(t.to(qflow::DType::Float32)); }

using ::qflow::testing_util::error_of;  // tests/error_of.h

/// |got - want| <= rtol * |want| + atol elementwise, after a shape check.
inline void expect_close(const qflow::Tensor& got, const qflow::Tensor& want, double rtol, double atol = 0.0,
                         const std::string& what = "") {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = qflow::to_vector<double>(got.to(qflow::DType::Float64));
  const std::vector<double> w = qflow::to_vector<double>(want.to(qflow::DType::Float64));
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - w[i]) <= rtol * std::abs(w[i]) + atol) && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i];
  }
}

}  // namespace quant_test
